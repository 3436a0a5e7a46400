"""How the stages of one generation pipeline talk while decoding (pg > 1).

A generation replica at (pg, tg) is pg stages of tg tensor ranks. A decoding
step runs the stages in order: stage s takes the hidden states stage s - 1
sent it, runs its layers and sends its output to stage s + 1 (point to point,
between the ranks of the same generation tensor rank: without sequence
parallelism every tensor rank of a stage holds the whole hidden state); the
last stage turns its output into logits and picks the token, which it then
broadcasts to every stage of its pipeline group, so every rank of the replica
appends the same token, tracks the same finished rows and stops at the same
step. ``torch.distributed`` send/recv/broadcast work on gloo and NCCL alike;
the device is the tensors' own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    import torch


@attrs.frozen(kw_only=True)
class StageLink:
    """This rank's place in its generation pipeline group and the sends along it.

    ``ranks`` are the global ranks of the group in stage order (from
    :func:`~hfsdk_backend_common.hybrid.layout.generation_pp_groups`), ``rank``
    this rank, ``group`` the process group (``None`` when pg = 1).
    """

    ranks: tuple[int, ...]
    rank: int
    group: Any = None

    @classmethod
    def single(cls) -> StageLink:
        """No pipeline: one stage that is first and last (pg = 1)."""
        return cls(ranks=(0,), rank=0)

    @property
    def stage(self) -> int:
        """This rank's generation stage."""
        return self.ranks.index(self.rank)

    @property
    def count(self) -> int:
        """Generation stages pg."""
        return len(self.ranks)

    @property
    def first(self) -> bool:
        """Whether this stage holds the embedding."""
        return self.stage == 0

    @property
    def last(self) -> bool:
        """Whether this stage holds the final norm and output layer (and picks tokens)."""
        return self.stage == self.count - 1

    def layers(self, num_layers: int) -> range:
        """The global decoder layers of this stage (``num_layers / pg`` consecutive ones)."""
        per = num_layers // self.count
        return range(self.stage * per, (self.stage + 1) * per)

    def receive(
        self, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device
    ) -> torch.Tensor:
        """The hidden states the previous stage sent (shape known from the step's inputs)."""
        import torch
        import torch.distributed as dist

        hidden = torch.empty(shape, dtype=dtype, device=device)
        dist.recv(hidden, src=self.ranks[self.stage - 1], group=self.group)
        return hidden

    def send(self, hidden: torch.Tensor) -> None:
        """Hand this stage's output to the next stage."""
        import torch.distributed as dist

        dist.send(hidden.contiguous(), dst=self.ranks[self.stage + 1], group=self.group)

    def share_token(self, token: torch.Tensor) -> torch.Tensor:
        """The last stage's token on every stage (in place into ``token``)."""
        if self.count > 1:
            import torch.distributed as dist

            dist.broadcast(token, src=self.ranks[-1], group=self.group)
        return token
