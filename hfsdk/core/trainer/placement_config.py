"""Configuration of where roles run: resource pools and the role -> pool map."""

from __future__ import annotations

from typing import Literal

import attrs

from hfsdk.core.config.help import help_field
from hfsdk.core.config.paths import absolute_if_exists

ROLLOUT_POOL = "rollout"
"""The pool name ``placement.pools.rollout``: the rollout replicas' own devices (docs/async.md)."""


@attrs.frozen(kw_only=True)
class PoolConfig:
    """A resource pool: ``devices`` in total, spread evenly over ``nodes``."""

    devices: int = help_field(
        "Devices (GPUs, or virtual CPU device slots) in the pool.",
        default=1,
        validator=attrs.validators.ge(1),
    )
    nodes: int = help_field(
        "Nodes the devices are spread over evenly (must divide devices).",
        default=1,
        validator=attrs.validators.ge(1),
    )
    tp: int = help_field(
        "Rollout pool only: tensor-parallel size of each rollout replica (tp consecutive "
        "devices decode together on megatron-format slices; must divide devices).",
        default=1,
        validator=attrs.validators.ge(1),
    )
    pp: int = help_field(
        "Rollout pool only: generation pipeline stages of each rollout replica (a replica is "
        "pp stages of tp devices, stage-major; pp must divide the model's layers and tp*pp "
        "the devices).",
        default=1,
        validator=attrs.validators.ge(1),
    )

    @nodes.validator
    def _divides(self, _attr: attrs.Attribute, value: int) -> None:
        if self.devices % value:
            raise ValueError(
                f"'nodes' ({value}) must divide 'devices' ({self.devices}); "
                "pools are spread evenly over nodes"
            )

    @tp.validator
    def _tp_divides(self, _attr: attrs.Attribute, value: int) -> None:
        if self.devices % value:
            raise ValueError(
                f"'tp' ({value}) must divide 'devices' ({self.devices}); the pool's devices "
                f"form devices/tp replicas of tp devices each"
            )

    @pp.validator
    def _pp_divides(self, _attr: attrs.Attribute, value: int) -> None:
        if self.devices % (self.tp * value):
            raise ValueError(
                f"'pp' ({value}) times tp ({self.tp}) must divide 'devices' ({self.devices}); "
                "the pool's devices form devices/(tp*pp) replicas of tp*pp devices each"
            )


def _default_pools() -> dict[str, PoolConfig]:
    return {"global": PoolConfig()}


def _with_a_pool_for_the_roles(pools: dict[str, PoolConfig]) -> dict[str, PoolConfig]:
    """A rollout pool alone (``pools: {rollout: {devices: 1}}``) still leaves the roles
    a pool of their own: the default one, listed first."""
    if pools and all(name == ROLLOUT_POOL for name in pools):
        return {**_default_pools(), **pools}
    return pools


NO_PLACEMENT_PLUGIN = (
    "placement.mode=auto needs a placement plugin, and none is installed or enabled (it "
    "implements hfsdk_resolve_placement); install hfsdk-plugin-planner (pip install "
    "hfsdk-plugin-planner, and drop it from HFSDK_DISABLE_PLUGINS) or set placement.mode=manual "
    "with placement.pools and placement.roles"
)
"""The one line a run with ``placement: auto`` and no placement plugin stops with."""


@attrs.frozen(kw_only=True)
class PlacementConfig:
    """Which pool each role runs on.

    Roles missing from ``roles`` go to the first pool listed other than
    ``rollout`` (the rollout replicas' own), so by default every role is
    colocated on one device. Roles on one pool share its devices (one
    process per device holding all of them when ``colocation`` is ``fused``);
    roles on different pools run concurrently. ``mode: auto`` asks the
    placement plugin instead (``hfsdk_resolve_placement``; ``hfsdk plan``).
    """

    mode: Literal["manual", "auto"] = help_field(
        "manual: pools and roles as given; auto: the placement plugin splits the pools' "
        "devices among the roles (hfsdk plan).",
        default="manual",
        validator=attrs.validators.in_(("manual", "auto")),
    )
    pools: dict[str, PoolConfig] = help_field(
        "Resource pools by name: {name: {devices: N, nodes: M}} (the rollout pool also tp, pp: "
        "its replicas' layout); roles on one pool share its devices. A rollout pool alone "
        "gets the default global pool beside it for the roles.",
        factory=_default_pools,
        converter=_with_a_pool_for_the_roles,
    )
    roles: dict[str, str] = help_field(
        "Role -> pool; roles not listed go to the first pool other than 'rollout'.", factory=dict
    )
    colocation: Literal["fused", "separate"] = help_field(
        "fused: one process per device holds all of a pool's roles; separate: one process per "
        "role and device.",
        default="fused",
        validator=attrs.validators.in_(("fused", "separate")),
    )
    cluster: str = help_field(
        "Hardware the placement search models: auto (detect this machine: its GPUs, else the CPU "
        "cores), a preset (hfsdk list clusters: a100-80gb, h100-80gb, h200-141gb, local) or "
        "a cluster profile YAML (hfsdk calibrate --output FILE).",
        default="auto",
        # A profile's path only: a preset name (auto) stays one even if such a file exists.
        converter=lambda v: absolute_if_exists(v) if str(v).endswith((".yaml", ".yml")) else v,
    )

    @pools.validator
    def _nonempty(self, _attr: attrs.Attribute, value: dict[str, PoolConfig]) -> None:
        if not value:
            raise ValueError("'pools' must name at least one pool, e.g. {global: {devices: 1}}")

    @pools.validator
    def _tp_on_rollout_only(self, _attr: attrs.Attribute, value: dict[str, PoolConfig]) -> None:
        for name, pool in value.items():
            if pool.tp != 1 and name != ROLLOUT_POOL:
                raise ValueError(
                    f"placement.pools.{name}.tp={pool.tp}, but tp applies only to the rollout "
                    f"pool (placement.pools.{ROLLOUT_POOL}); set it to 1 (training layouts are "
                    "the backends' parallel settings)"
                )
            if pool.pp != 1 and name != ROLLOUT_POOL:
                raise ValueError(
                    f"placement.pools.{name}.pp={pool.pp}, but pp applies only to the rollout "
                    f"pool (placement.pools.{ROLLOUT_POOL}); set it to 1 (training layouts are "
                    "the backends' parallel settings)"
                )

    @roles.validator
    def _known_pools(self, _attr: attrs.Attribute, value: dict[str, str]) -> None:
        for role, pool in value.items():
            if pool not in self.pools:
                raise ValueError(
                    f"'roles' maps {role!r} to pool {pool!r}, which is not defined; "
                    f"defined pools: {sorted(self.pools)}"
                )

    def pool_of(self, role: str) -> str:
        """The pool ``role`` runs on: its ``roles`` entry, else the first pool listed that
        is not the rollout replicas' own (``placement.pools.rollout`` never receives a role
        implicitly, wherever it is listed)."""
        if role in self.roles:
            return self.roles[role]
        return next((name for name in self.pools if name != ROLLOUT_POOL), next(iter(self.pools)))
