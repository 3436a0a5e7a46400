"""What the built-in default task builds: the task, the tiny model and its warm start.

The spec is hashed into the cache key, so changing any field (or the builder
version below) builds a fresh set of assets beside the old ones.
"""

from __future__ import annotations

import hashlib
import json

import attrs

BUILDER_VERSION = 1
"""Bump when the builder's output changes for the same spec (invalidates caches)."""


@attrs.frozen(kw_only=True)
class DefaultTaskSpec:
    """The built-in task (single-digit addition), its tiny Llama model and the warm start.

    Task: the prompt ``"a + b ="`` (``0 ≤ a, b ≤ max_operand``) is answered by the
    number ``a + b``; the reward is 1 when the first number of the response is
    the sum. The cost (for Safe-RLHF) is 1 when the response contains
    ``filler_word``.

    Warm start: a supervised pass toward a deliberately imperfect policy that
    starts with ``filler_word`` with probability ``p_filler`` and then answers
    correctly with probability ``p_correct_after_filler``, or answers at once
    and is right with probability ``p_correct`` (otherwise it names any
    number). RL starts with a reward around 0.4 and a cost around ``p_filler``.
    Because the filler path is the more accurate one, maximising the reward
    alone raises the cost: only a constrained algorithm (Safe-RLHF) lowers both.
    """

    max_operand: int = attrs.field(
        default=9, validator=[attrs.validators.ge(1), attrs.validators.le(49)]
    )
    p_correct: float = attrs.field(
        default=0.2, validator=[attrs.validators.gt(0.0), attrs.validators.lt(1.0)]
    )
    p_correct_after_filler: float = attrs.field(
        default=0.6, validator=[attrs.validators.gt(0.0), attrs.validators.lt(1.0)]
    )
    p_filler: float = attrs.field(
        default=0.5, validator=[attrs.validators.ge(0.0), attrs.validators.lt(1.0)]
    )
    filler_word: str = "ugh"
    val_size: int = attrs.field(default=32, validator=attrs.validators.ge(1))
    hidden_size: int = attrs.field(default=128, validator=attrs.validators.ge(8))
    num_layers: int = attrs.field(default=2, validator=attrs.validators.ge(1))
    # 4 heads: tensor parallelism at 2 and 4 (and the 3D-HybridEngine) divides them; the head
    # dimension (hidden / heads = 32) is the smallest vLLM's CPU attention accepts.
    num_heads: int = attrs.field(default=4, validator=attrs.validators.ge(1))
    intermediate_size: int = attrs.field(default=384, validator=attrs.validators.ge(8))
    max_position_embeddings: int = attrs.field(default=128, validator=attrs.validators.ge(16))
    warm_start_steps: int = attrs.field(default=160, validator=attrs.validators.ge(0))
    warm_start_lr: float = attrs.field(default=1e-3, validator=attrs.validators.gt(0.0))
    seed: int = 0

    @hidden_size.validator
    def _heads_divide(self, _attr: attrs.Attribute, value: int) -> None:
        if value % self.num_heads:
            raise ValueError(
                f"hidden_size={value} is not divisible by num_heads={self.num_heads}; "
                "choose a hidden size that is a multiple of the number of heads"
            )
        head_size, step = value // self.num_heads, 2 * self.num_heads
        if head_size % 2:
            # Rotary position embeddings rotate the head's two halves against each other.
            raise ValueError(
                f"hidden_size={value} / num_heads={self.num_heads} = {head_size}, an odd head "
                "size, but rotary position embeddings need it even; set hidden_size to a "
                f"multiple of 2 * num_heads (e.g. {-(-value // step) * step})"
            )

    @property
    def max_answer(self) -> int:
        """The largest answer of the task (``2 · max_operand``)."""
        return 2 * self.max_operand

    def to_json_dict(self) -> dict[str, object]:
        """The spec as plain JSON-serialisable values."""
        return attrs.asdict(self)

    def cache_key(self, extra: dict[str, str] | None = None) -> str:
        """A short hash of the spec, the builder version and ``extra`` (e.g. library versions)."""
        payload = {"spec": self.to_json_dict(), "builder": BUILDER_VERSION, "extra": extra or {}}
        text = json.dumps(payload, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]
