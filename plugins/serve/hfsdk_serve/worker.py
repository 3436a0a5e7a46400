"""The serve role's worker: one rank of the worker group that holds the base model and adapters.

Each rank holds the base model with every client's LoRA adapter
(:class:`~.adapters.AdapterPool`: the fsdp backend's model loader, FSDP2
sharding and LoRA code); on several ranks the base weights are sharded over
them (1/N each) and the adapters replicated. The adapters are the same on
every rank: they start from the same seed,
and ``optim_step`` sums their gradients over the ranks first, so every rank
takes the same AdamW step. ``forward_backward`` gives each rank every
``world_size``-th datum of the request (data parallel), in micro-batches of
bounded tokens; under FSDP every rank runs the same number of forwards and
backwards (as many as the rank with the most micro-batches; a rank out of datums
with a zero loss), since each pass gathers the sharded base collectively; sampling runs on
rank 0 (a sharded base is gathered on every rank for the call),
through one rollout of the backend the server was started with
(:class:`~.sampling.PoolSampler`).

Every method is called on all ranks with the whole request (``ONE_TO_ALL``,
sampling ``RANK_ZERO``) and validates all of it, so a bad request is refused by
every rank before any collective. A request the server cannot carry out comes
back as a :class:`Refusal` (the message of the :class:`~hfsdk.HfsdkError`
raised), which the controller raises again; anything else is a worker failure.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import attrs
import numpy as np
import torch

from hfsdk import BuiltinProtocol, HfsdkError, Worker, register
from hfsdk_serve import training
from hfsdk_serve.adapters import AdapterPool, AdapterSpec
from hfsdk_serve.losses import LossFn
from hfsdk_serve.sampling import PoolSampler, SampleSpec
from hfsdk_serve.wire import DatumIn, SequenceOut

F = TypeVar("F", bound=Callable[..., Any])


@attrs.frozen
class Refusal:
    """A request this rank refused: the one-line message (``None``: another rank refused)."""

    message: str | None


def _refusals(fn: F) -> F:
    """``fn`` with an :class:`HfsdkError` returned as a :class:`Refusal` (not a failure)."""

    @functools.wraps(fn)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(self, *args, **kwargs)
        except HfsdkError as exc:
            return Refusal(str(exc).strip().splitlines()[0] if str(exc).strip() else "refused")

    return run  # type: ignore[return-value]


class ServeWorker(Worker):
    """One rank of ``hfsdk serve``: the base model of ``model_dir`` and the clients' adapters."""

    def __init__(self, *, model_dir: str, rollout: str = "hf") -> None:
        super().__init__()
        self.pool = AdapterPool(
            Path(model_dir), group=self.process_group if self._distributed() else None
        )
        self.rollout = rollout
        self._sampler: PoolSampler | None = None

    def close(self) -> None:
        """Release the sampler's rollout (a vLLM engine's threads and groups)."""
        sampler, self._sampler = self._sampler, None
        if sampler is not None:
            sampler.close()

    def sampler(self) -> PoolSampler:
        """Rank 0's rollout over the pool, built at the first sample (a vLLM engine: seconds)."""
        if self._sampler is None:
            self._sampler = PoolSampler(self.pool, self.rollout)
        return self._sampler

    # -- collectives ---------------------------------------------------------------------

    def _distributed(self) -> bool:
        return self.world_size > 1 and self.process_group is not None

    def _all_agree(self, ok: bool) -> bool:
        """Whether every rank is ``ok`` (one collective; always ``ok`` on one rank)."""
        if not self._distributed():
            return ok
        flag = torch.tensor([1 if ok else 0], dtype=torch.int64)
        torch.distributed.all_reduce(
            flag, op=torch.distributed.ReduceOp.MIN, group=self.process_group
        )
        return bool(flag.item())

    def _sum_over_ranks(self, tensors: Sequence[torch.Tensor]) -> None:
        """Sum ``tensors`` over the ranks in place (one flat all-reduce)."""
        if not self._distributed() or not tensors:
            return
        flat = torch.cat([t.reshape(-1) for t in tensors])
        torch.distributed.all_reduce(flat, group=self.process_group)
        offset = 0
        for t in tensors:
            t.copy_(flat[offset : offset + t.numel()].view_as(t))
            offset += t.numel()

    # -- model facts ---------------------------------------------------------------------

    @register(protocol=BuiltinProtocol.RANK_ZERO)
    def describe(self) -> dict[str, Any]:
        """The base model's architecture, vocabulary size and context length."""
        return {
            "arch": self.pool.arch,
            "vocab_size": self.pool.vocab_size,
            "max_length": self.pool.max_length,
        }

    # -- adapters ------------------------------------------------------------------------

    @register(protocol=BuiltinProtocol.ONE_TO_ALL)
    @_refusals
    def add_adapter(self, name: str, spec: Mapping[str, Any], trainable: bool) -> None:
        """A fresh adapter ``name`` of ``spec`` (with its AdamW when ``trainable``)."""
        self.pool.add(name, AdapterSpec(**spec), trainable=trainable)

    @register(protocol=BuiltinProtocol.ONE_TO_ALL)
    def remove_adapter(self, name: str) -> None:
        """Drop adapter ``name``."""
        self.pool.remove(name)

    @register(protocol=BuiltinProtocol.ONE_TO_ALL)
    @_refusals
    def copy_adapter(self, source: str, target: str) -> None:
        """Adapter ``target``'s weights := ``source``'s."""
        self.pool.copy_into(source, target)

    @register(protocol=BuiltinProtocol.RANK_ZERO)
    @_refusals
    def adapter_state(self, name: str, optimizer: bool) -> dict[str, Any]:
        """Adapter ``name``'s weights (and its AdamW state); every rank holds the same."""
        adapter = self.pool.get(name)
        state: dict[str, Any] = {"adapter": self.pool.adapter_state(name)}
        if optimizer:
            assert adapter.optimizer is not None
            state["optimizer"] = adapter.optimizer.state_dict()
        return state

    @register(protocol=BuiltinProtocol.ONE_TO_ALL)
    @_refusals
    def load_adapter_state(
        self, name: str, weights: Mapping[str, torch.Tensor], optimizer: Mapping[str, Any] | None
    ) -> None:
        """Set adapter ``name`` from :meth:`adapter_state`'s output (no optimizer: a fresh one)."""
        adapter = self.pool.get(name)
        self.pool.load_adapter_state(name, dict(weights))
        if optimizer is not None:
            if adapter.optimizer is None:
                raise HfsdkError(f"adapter {name!r} is a sampler snapshot; it has no optimizer")
            adapter.optimizer.load_state_dict(optimizer)
        elif adapter.optimizer is not None:  # a training client starts a fresh AdamW
            adapter.optimizer = torch.optim.AdamW(list(adapter.params.values()), lr=0.0)
        for p in adapter.params.values():
            p.grad = None

    # -- training ------------------------------------------------------------------------

    @register(protocol=BuiltinProtocol.ONE_TO_ALL)
    @_refusals
    def forward_backward(
        self,
        name: str,
        data: Sequence[DatumIn],
        loss_name: str,
        config: Mapping[str, float | str],
        backward: bool,
    ) -> dict[str, Any] | Refusal:
        """This rank's share of the datums: their log-probs and loss; gradients when asked.

        The share runs in micro-batches (:func:`~.training.micro_batches`), each with its
        own forward and backward, so memory is bounded by the micro-batch, not the request.
        Gradients are kept only when every rank computed a finite loss for every micro-batch,
        so a refused request leaves the adapter's accumulated gradients as they were on all
        ranks.
        """
        fn = training.check_request(self.pool, data, loss_name)
        shares = [list(range(r, len(data), self.world_size)) for r in range(self.world_size)]
        batches = training.micro_batches(data, shares[self.rank])
        # Every rank runs as many rounds as the rank with the most micro-batches: each round
        # agrees over the ranks, and on a sharded base its forward and backward are collective.
        rounds = max(len(training.micro_batches(data, share)) for share in shares)
        params = list(self.pool.get(name).params.values())
        # A later micro-batch may be refused after earlier ones were back-propagated.
        keep = backward and rounds > 1
        saved = [p.grad.clone() if keep and p.grad is not None else None for p in params]
        logps: list[torch.Tensor] = []
        total = torch.zeros(())
        with self.pool.active(name, train=backward), torch.set_grad_enabled(backward):
            for k in range(rounds):
                batch = [data[i] for i in batches[k]] if k < len(batches) else []
                done = self._micro_batch(batch, fn, loss_name, config, backward)
                if isinstance(done, Refusal):
                    if keep:
                        for p, grad in zip(params, saved, strict=True):
                            p.grad = grad
                    return done
                logps.extend(done[0])
                total = total + done[1]
        return {
            "indices": shares[self.rank],
            "logprobs": [lp.numpy().astype(np.float32) for lp in logps],
            "loss": float(total),
        }

    def _micro_batch(
        self,
        batch: Sequence[DatumIn],
        fn: LossFn,
        loss_name: str,
        config: Mapping[str, float | str],
        backward: bool,
    ) -> tuple[list[torch.Tensor], torch.Tensor] | Refusal:
        """One round of :meth:`forward_backward`: the batch's log-probs and summed loss
        (detached), back-propagated when asked once every rank's loss is finite."""
        try:
            if batch or not self.pool.sharded:
                logps, total = training.datum_losses(self.pool, batch, fn, config)
            else:  # the sharded base is gathered in every pass: this rank joins it
                logps, total = [], training.idle_loss(self.pool)
            loss = float(total.detach())
            if not math.isfinite(loss):
                raise HfsdkError(
                    f"the {loss_name} loss is {loss} (not finite); check the advantages, "
                    "weights and sampler log-probs sent with the datums"
                )
        except HfsdkError as exc:
            self._all_agree(False)
            return Refusal(str(exc).strip().splitlines()[0])
        if not self._all_agree(True):
            return Refusal(None)
        if backward and (batch or self.pool.sharded):
            total.backward()
        return [lp.detach() for lp in logps], total.detach()

    @register(protocol=BuiltinProtocol.ONE_TO_ALL)
    @_refusals
    def optim_step(self, name: str, params: Mapping[str, float]) -> dict[str, float]:
        """Sum the adapter's gradients over the ranks, then one AdamW step (same on every rank)."""
        adapter = self.pool.get(name)
        training.check_adam(params)
        trained = list(adapter.params.values())
        if self._distributed() and not self._all_agree(all(p.grad is None for p in trained)):
            # Some rank has gradients: a rank that had no datum adds zeros to the sum.
            for p in trained:
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
            self._sum_over_ranks([p.grad for p in trained])
        return training.optim_step(self.pool, name, params)

    # -- sampling ------------------------------------------------------------------------

    @register(protocol=BuiltinProtocol.ONE_TO_ALL)
    @_refusals
    def sample(
        self, name: str | None, spec: SampleSpec
    ) -> tuple[list[SequenceOut], list[float] | None] | None:
        """Samples of adapter ``name`` (``None``: the base model) through the rollout contract,
        made on rank 0; the other ranks return ``None``.

        Every rank gathers a sharded base and gives its own rollout the sampled weights
        (as every rank of a training actor does: a backend that keeps an engine per rank
        may agree a reload over all ranks), so only the generation itself is rank 0's.
        """
        with self.pool.whole():
            sampler = self.sampler()
            sampler.select(name)
            if self.rank != 0:
                return None
            return sampler.sample(name, spec)

    @register(protocol=BuiltinProtocol.ONE_TO_ALL)
    def base_storage(self) -> tuple[int, int]:
        """(bytes of base weights this rank holds, bytes of the whole base model)."""
        return self.pool.base_storage()

    @register(protocol=BuiltinProtocol.RANK_ZERO)
    def sampler_reloads(self) -> int:
        """How often the sampler's rollout was given new weights (0 before the first sample)."""
        return 0 if self._sampler is None else self._sampler.reloads
