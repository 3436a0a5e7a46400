"""What one iteration processes, and the unit the planner caches per role.

:class:`Workload` is shared by every role of a run (batch size, lengths);
:class:`RoleTask` is one role's share of it: its model and, per stage, the
kind of work it does. Two roles with equal tasks (a reference and a reward
model of the same size) cost the same, so the simulator caches by task.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from hfsdk import WORK_KINDS, HfsdkError
from hfsdk_planner.model_spec import ModelSpec


def _at_least(minimum: int) -> Callable[[object, attrs.Attribute, int], None]:
    """An attrs validator: an integer no smaller than ``minimum``."""

    def check(_inst: object, attr: attrs.Attribute, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise HfsdkError(f"workload {attr.name} must be an integer >= {minimum}, got {value!r}")

    return check


@attrs.frozen(kw_only=True)
class Workload:
    """One training iteration's data: prompts, samples, lengths and update steps.

    Defaults follow the HybridFlow paper's setup: 1024 prompts of 1024 tokens,
    1024-token responses, one PPO epoch of 8 mini-batch updates.
    ``micro_batch_size`` is sequences per forward/backward micro-batch of
    training, ``forward_micro_batch_size`` per micro-batch of an inference
    pass (0: ``micro_batch_size``);
    ``max_running_sequences`` caps how many sequences a rollout replica
    decodes at once (vLLM's ``max_num_seqs`` default). ``recompute`` is full
    activation recomputation in training (gradient checkpointing: 8 FLOPs per
    parameter and token instead of 6); ``decode_steps`` how many tokens a
    rollout decodes (0: ``response_length``; a batch decodes until its longest
    response ends, so a run's mean response is shorter); ``dtype_bytes`` the width of the
    weights a decode step reads (2 for bf16, 4 for fp32). ``lora_rank`` > 0:
    the policy (the role that generates and trains) trains LoRA adapters of
    that rank on every linear layer of its blocks, its base frozen;
    ``packing``: training and inference passes pack their rows, so their
    activations cover ``mean_sequence_length`` tokens per sequence (0: the
    full ``sequence_length``, i.e. no gain) instead of the padded length.
    ``epochs``: passes of the update over the batch (``ppo_epochs``), each of
    ``optimizer_steps`` mini-batch updates.
    """

    batch_size: int = attrs.field(default=1024, validator=_at_least(1))
    samples_per_prompt: int = attrs.field(default=1, validator=_at_least(1))
    prompt_length: int = attrs.field(default=1024, validator=_at_least(1))
    response_length: int = attrs.field(default=1024, validator=_at_least(1))
    optimizer_steps: int = attrs.field(default=8, validator=_at_least(1))
    micro_batch_size: int = attrs.field(default=2, validator=_at_least(1))
    forward_micro_batch_size: int = attrs.field(default=0, validator=_at_least(0))
    max_running_sequences: int = attrs.field(default=256, validator=_at_least(1))
    decode_steps: int = attrs.field(default=0, validator=_at_least(0))
    recompute: bool = attrs.field(default=True, validator=attrs.validators.instance_of(bool))
    dtype_bytes: int = attrs.field(default=2, validator=_at_least(1))
    lora_rank: int = attrs.field(default=0, validator=_at_least(0))
    packing: bool = attrs.field(default=False, validator=attrs.validators.instance_of(bool))
    mean_sequence_length: int = attrs.field(default=0, validator=_at_least(0))
    epochs: int = attrs.field(default=1, validator=_at_least(1))

    @property
    def sequences(self) -> int:
        """Sequences generated and trained on per iteration."""
        return self.batch_size * self.samples_per_prompt

    @property
    def forward_micro_batch(self) -> int:
        """Sequences per inference micro-batch."""
        return self.forward_micro_batch_size or self.micro_batch_size

    @property
    def sequence_length(self) -> int:
        """Prompt plus response tokens."""
        return self.prompt_length + self.response_length

    @property
    def generated_tokens(self) -> int:
        """Decode steps per rollout wave."""
        return self.decode_steps or self.response_length

    @property
    def tokens(self) -> int:
        """Tokens in one full pass over the iteration's sequences."""
        return self.sequences * self.sequence_length

    def __attrs_post_init__(self) -> None:
        if self.sequences < self.optimizer_steps:
            raise HfsdkError(
                f"workload has {self.sequences} sequences but {self.optimizer_steps} optimizer "
                "steps; each step needs at least one sequence (lower optimizer_steps)"
            )


@attrs.frozen(kw_only=True)
class RoleTask:
    """One role's work in an iteration: its model and (stage index, work kind) pairs.

    The role's name is deliberately absent: equal tasks share cache entries.
    """

    model: ModelSpec
    work: tuple[tuple[int, str], ...] = attrs.field(converter=lambda w: tuple(map(tuple, w)))
    workload: Workload

    @work.validator
    def _check(self, _attr: attrs.Attribute, value: tuple[tuple[int, str], ...]) -> None:
        for _stage, kind in value:
            if kind not in WORK_KINDS:
                raise HfsdkError(f"work kind {kind!r} is not one of {WORK_KINDS}")

    @property
    def trains(self) -> bool:
        """Whether the role holds optimizer state (it has a training stage)."""
        return any(kind == "training" for _stage, kind in self.work)

    @property
    def generates(self) -> bool:
        """Whether the role generates (it needs a rollout layout and a KV cache)."""
        return any(kind == "generation" for _stage, kind in self.work)
