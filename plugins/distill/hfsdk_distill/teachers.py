"""Teacher roles named by the run's config (``algorithm.teachers``), not by the spec.

``algorithm.teachers: {math: teacher_math, code: teacher_code}`` makes the run's
spec the registered one with its ``frozen_policy`` roles replaced by one role
per distinct name (in the order given): each is a config section of its own
(``teacher_math.model_path``, backend, batch sizes) and a frozen worker group of
its own. On the default task each starts from the spec's teacher preset (the
warm-started model), as the spec's own teachers do.
"""

from __future__ import annotations

import re
from typing import Any

import attrs

from hfsdk import AlgorithmSpec, ConfigError, RoleSpec, get_registry

_ROLE_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_CORE_SECTIONS = ("algorithm", "rollout", "advantage", "policy_loss", "value_loss")
"""The run config's sections that are neither roles nor registered (``config_sections``)."""
_RUN_CONFIG_ATTRIBUTES = ("algo", "sections", "to_dict", "to_yaml")
"""The run config's own attributes (not views of a section): a role section of that name
is shadowed by the attribute (a test keeps this list equal to ``RunConfig``'s)."""


def configure_teachers(spec: AlgorithmSpec, algorithm_config: Any) -> AlgorithmSpec:
    """``spec`` with the teacher roles ``algorithm_config.teachers`` names (itself if none)."""
    teachers = dict(algorithm_config.teachers)
    if not teachers:
        return spec
    names = list(dict.fromkeys(teachers.values()))
    # A teacher is a config section of its own, so it cannot take another section's name.
    others = [r.name for r in spec.roles if r.kind != "frozen_policy"]
    others += [*_CORE_SECTIONS, *sorted(get_registry("config_sections").keys())]
    for source, name in teachers.items():
        if isinstance(name, str) and name in _RUN_CONFIG_ATTRIBUTES:
            # config.<name> answers the run config's own attribute (config.algo is the
            # algorithm's name), so <name>.model_path would never reach the teacher.
            raise ConfigError(
                f"algorithm.teachers.{source} is {name!r}, the run config's own attribute "
                f"(reserved: {', '.join(_RUN_CONFIG_ATTRIBUTES)}), so {name}.model_path would "
                "never reach the teacher; give the teacher another role name (e.g. teacher_math)"
            )
        if not isinstance(name, str) or not _ROLE_NAME.match(name) or name in others:
            raise ConfigError(
                f"algorithm.teachers.{source} is {name!r}: a teacher is a role name of lowercase "
                f"letters, digits and '_' starting with a letter, other than {', '.join(others)} "
                "(e.g. teacher_math); set <role>.model_path to its model"
            )
    spec_teachers = spec.roles_of_kind("frozen_policy")
    teacher_preset = spec.preset.get(spec_teachers[0]) if spec_teachers else None
    preset = {k: v for k, v in spec.preset.items() if k not in spec_teachers}
    if teacher_preset is not None:
        preset.update({name: teacher_preset for name in names})
    policy = [r for r in spec.roles if r.kind not in ("frozen_policy", "scorer")]
    scorers = [r for r in spec.roles if r.kind == "scorer"]
    roles = (*policy, *(RoleSpec(name=n, kind="frozen_policy") for n in names), *scorers)
    return attrs.evolve(spec, roles=roles, preset=preset, configure=None)
