"""A rank's position in a named (pp, tp, dp) mesh, read by the mesh protocols.

Light module: no torch, no ray.
"""

from __future__ import annotations

import attrs

from hfsdk.core.errors import HfsdkError

_non_negative = attrs.validators.ge(0)
_positive = attrs.validators.ge(1)


@attrs.frozen(kw_only=True)
class MeshPosition:
    """Where one rank sits in a (pp, tp, dp) mesh.

    ``collect`` says whether the controller takes this rank's result; left at
    ``None`` it is derived as the paper's rule: tensor-parallel rank 0 of the
    last pipeline stage.
    """

    dp_rank: int = attrs.field(validator=_non_negative)
    dp_size: int = attrs.field(validator=_positive)
    tp_rank: int = attrs.field(default=0, validator=_non_negative)
    tp_size: int = attrs.field(default=1, validator=_positive)
    pp_rank: int = attrs.field(default=0, validator=_non_negative)
    pp_size: int = attrs.field(default=1, validator=_positive)
    collect: bool | None = None

    def __attrs_post_init__(self) -> None:
        for axis in ("dp", "tp", "pp"):
            rank, size = getattr(self, f"{axis}_rank"), getattr(self, f"{axis}_size")
            if rank >= size:
                raise HfsdkError(
                    f"mesh position has {axis}_rank={rank} but {axis}_size={size}; "
                    f"{axis}_rank must be below {axis}_size"
                )

    @property
    def collects(self) -> bool:
        """Whether the controller collects this rank's result under ``MESH_PROTO``."""
        if self.collect is not None:
            return self.collect
        return self.tp_rank == 0 and self.pp_rank == self.pp_size - 1

    @classmethod
    def from_rank(cls, rank: int, *, pp: int = 1, tp: int = 1, dp: int = 1) -> MeshPosition:
        """The position of global ``rank`` in a mesh of shape (pp, dp, tp), tp varying fastest.

        This is Megatron's default order: consecutive ranks form a tensor-parallel
        group, then data-parallel replicas, then pipeline stages.
        """
        size = pp * tp * dp
        if not 0 <= rank < size:
            raise HfsdkError(f"rank {rank} is outside a pp={pp} x tp={tp} x dp={dp} mesh")
        return cls(
            pp_rank=rank // (dp * tp),
            pp_size=pp,
            dp_rank=(rank // tp) % dp,
            dp_size=dp,
            tp_rank=rank % tp,
            tp_size=tp,
        )
