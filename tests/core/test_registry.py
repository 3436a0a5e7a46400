"""Registries: register, look up, duplicates, unknown names, every kind."""

from __future__ import annotations

import attrs
import pluggy
import pytest

import hfsdk
from hfsdk.core.errors import DuplicateNameError, HfsdkError, UnknownNameError
from hfsdk.core.plugin_manager import build_plugin_manager
from hfsdk.core.registry import REGISTRY_HOOKS, Registry, normalize_kind


@attrs.frozen(kw_only=True)
class _Cfg:
    alpha: float = 1.0


@attrs.frozen(kw_only=True)
class _RoleCfg(hfsdk.RoleConfig):
    alpha: float = 1.0


@attrs.frozen(kw_only=True)
class _RolloutCfg(hfsdk.RolloutConfig):
    alpha: float = 1.0


def _cfg(hook: str) -> type:
    """A backend's config extends its section's base; every other kind takes any attrs class."""
    return {
        "hfsdk_register_training_backends": _RoleCfg,
        "hfsdk_register_rollout_backends": _RolloutCfg,
    }.get(hook, _Cfg)


def _thing() -> None:
    """A test implementation.

    More text.
    """


class _Program(hfsdk.Algorithm):
    """A test implementation.

    More text.
    """


_TASKS: dict[str, object] = {}


def _impl(hook: str, name: str) -> object:
    """What the hook registers: algorithms a spec, tasks a task, every other kind ``_thing``."""
    if hook == "hfsdk_register_tasks":
        return _TASKS.setdefault(name, hfsdk.Task(summary="A test implementation.", assets=_thing))
    if hook == "hfsdk_register_algorithms":
        return hfsdk.AlgorithmSpec(
            name=name, program=_Program, config_cls=_Cfg, roles=[("actor", "policy")]
        )
    return _thing


def _plugin_for(hook: str, name: str) -> object:
    class Plugin:
        pass

    def impl(register):  # type: ignore[no-untyped-def]
        register(name, _impl(hook, name), config_cls=_cfg(hook), color="blue")

    impl.__name__ = hook
    setattr(Plugin, hook, staticmethod(hfsdk.hookimpl(impl)))
    return Plugin


@pytest.mark.parametrize("kind", sorted(REGISTRY_HOOKS))
def test_every_kind_registers_and_looks_up(kind: str) -> None:
    plugin = _plugin_for(REGISTRY_HOOKS[kind], "my_entry")
    pm = build_plugin_manager([("mine", plugin)], load_entry_points=False)
    registry = pm.registry(kind)
    entry = registry["my_entry"]
    assert entry.impl == _impl(REGISTRY_HOOKS[kind], "my_entry")
    assert entry.config_cls is _cfg(REGISTRY_HOOKS[kind])
    assert entry.plugin == "mine"
    assert entry.summary == "A test implementation."
    assert entry.extra == {"color": "blue"}
    assert entry.make_config(alpha=2.0) == _cfg(REGISTRY_HOOKS[kind])(alpha=2.0)


@pytest.mark.parametrize("kind", sorted(REGISTRY_HOOKS))
def test_every_kind_rejects_duplicates_naming_both_plugins(kind: str) -> None:
    hook = REGISTRY_HOOKS[kind]
    pm = build_plugin_manager(
        [("first", _plugin_for(hook, "same")), ("second", _plugin_for(hook, "same"))],
        load_entry_points=False,
    )
    with pytest.raises(DuplicateNameError) as info:
        pm.registry(kind)
    assert "'first'" in str(info.value) and "'second'" in str(info.value)
    assert "'same'" in str(info.value)


@pytest.mark.parametrize("kind", sorted(REGISTRY_HOOKS))
def test_every_kind_unknown_name_lists_names_and_suggests(kind: str) -> None:
    pm = build_plugin_manager(
        [("mine", _plugin_for(REGISTRY_HOOKS[kind], "token_mean"))], load_entry_points=False
    )
    with pytest.raises(UnknownNameError) as info:
        pm.registry(kind)["token_maen"]
    message = str(info.value)
    assert "'token_maen'" in message
    assert "available: " in message and "token_mean" in message
    assert "did you mean 'token_mean'?" in message


def test_registry_is_read_only_mapping() -> None:
    registry = Registry("algorithms")
    registry._add("x", _thing, plugin="p")
    assert list(registry) == ["x"] and len(registry) == 1 and "x" in registry
    with pytest.raises(TypeError):
        registry["y"] = registry["x"]  # type: ignore[index]
    # Mapping.get: a default (None unless given) for a missing name, never an error.
    assert registry.get("missing") is None
    assert registry.get("missing", 7) == 7
    assert registry.get("x") is registry["x"]
    with pytest.raises(UnknownNameError):
        registry["missing"]


def test_an_algorithm_must_be_registered_as_its_spec() -> None:
    plugin = _plugin_for("hfsdk_register_policy_losses", "x")  # registers a bare function
    plugin.hfsdk_register_algorithms = plugin.hfsdk_register_policy_losses  # type: ignore[attr-defined]
    del plugin.hfsdk_register_policy_losses  # type: ignore[attr-defined]
    pm = build_plugin_manager([("mine", plugin)], load_entry_points=False)
    # The plugin is dropped and named; before, every run stopped, --algo grpo too.
    assert "x" not in pm.registry("algorithms")
    info = pm.plugin_info("mine")
    assert info is not None and info.status == "failed"
    assert "expected an hfsdk.AlgorithmSpec" in (info.error or "")


def test_a_function_kinds_entry_that_cannot_be_called_is_refused() -> None:
    class NotCallable:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_reward_functions(register):  # type: ignore[no-untyped-def]
            register("nc_score", 42)

    pm = build_plugin_manager([("nc", NotCallable)], load_entry_points=False)
    # Before: listed with int's docstring, and the run failed at step 1 after model build.
    assert "nc_score" not in pm.registry("reward_functions")
    info = pm.plugin_info("nc")
    assert info is not None and "registered reward function 'nc_score' as 42, which cann" in (
        info.error or ""
    )


def test_bad_names_and_config_classes_are_rejected() -> None:
    registry = Registry("policy_losses")
    with pytest.raises(HfsdkError, match="expected a name"):
        registry._add("9 bad name", _thing, plugin="p")

    class NotAttrs:
        pass

    with pytest.raises(HfsdkError, match="expected an attrs class"):
        registry._add("ok", _thing, plugin="p", config_cls=NotAttrs)


def test_kind_names_accept_dashes_and_reject_unknown() -> None:
    assert normalize_kind("advantage-estimators") == "advantage_estimators"
    with pytest.raises(UnknownNameError, match="did you mean 'algorithms'"):
        normalize_kind("algorithm")


def test_public_get_registry_sees_installed_plugins() -> None:
    algorithms = hfsdk.get_registry("algorithms")
    assert {"ppo", "grpo", "remax", "safe_rlhf"} <= set(algorithms)
    assert algorithms["grpo"].plugin == "grpo"
    assert "actor" in algorithms["ppo"].impl.role_names
    assert algorithms["ppo"].config_cls is algorithms["ppo"].impl.config_cls
    assert {"fsdp", "megatron"} <= set(hfsdk.get_registry("training-backends"))


class _JudgeSpecs:
    @staticmethod
    @pluggy.HookspecMarker("hfsdk")
    def hfsdk_register_judges(register: hfsdk.Register) -> None:
        """Register judges (a plugin's own hook)."""


def _judges_plugin(kind: str = "judges", hook: str = "hfsdk_register_judges") -> object:
    class Plugin:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_addhooks(pluginmanager):  # type: ignore[no-untyped-def]
            pluginmanager.add_hookspecs(_JudgeSpecs)

        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_registry_kinds(register):  # type: ignore[no-untyped-def]
            register(kind, hook)

        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_judges(register):  # type: ignore[no-untyped-def]
            register("strict", _thing)

    return Plugin


def test_a_plugin_adds_a_registry_kind_that_works_like_a_core_one() -> None:
    other = _plugin_for("hfsdk_register_judges", "strict")
    manager = build_plugin_manager(
        [("judging", _judges_plugin()), ("other", other)], load_entry_points=False
    )
    assert manager.registry_kinds()["judges"] == "hfsdk_register_judges"
    assert set(REGISTRY_HOOKS) < set(manager.registry_kinds())
    with pytest.raises(DuplicateNameError) as info:
        manager.registry("judges")
    assert "'judging'" in str(info.value) and "'other'" in str(info.value)

    alone = build_plugin_manager([("judging", _judges_plugin())], load_entry_points=False)
    entry = alone.registry("judges")["strict"]
    assert (entry.impl, entry.plugin, entry.summary) == (
        _thing,
        "judging",
        "A test implementation.",
    )
    with pytest.raises(UnknownNameError) as unknown:
        alone.registry("judge")
    assert "judges" in str(unknown.value)


@pytest.mark.parametrize(
    ("kind", "hook", "says"),
    [
        ("rewards", "hfsdk_register_judges", "already has"),
        ("tasks", "hfsdk_register_judges", "the core already has"),
        ("judges", "hfsdk_register_jugdes", "no hook specification defines"),
    ],
)
def test_a_bad_registry_kind_is_one_line(kind: str, hook: str, says: str) -> None:
    manager = build_plugin_manager(
        [("judging", _judges_plugin(kind, hook))], load_entry_points=False
    )
    assert "judges" not in manager.registry_kinds()  # the plugin is dropped, the others go on
    info = manager.plugin_info("judging")
    assert info is not None and info.status == "failed" and info.error is not None
    assert says in info.error and "'judging'" in info.error and "\n" not in info.error


def test_hfsdk_list_shows_a_plugin_kind() -> None:
    from click.testing import CliRunner

    from hfsdk.core.cli.main import cli
    from hfsdk.core.plugin_manager import get_plugin_manager, reset_plugin_manager

    reset_plugin_manager()
    get_plugin_manager().pm.register(_judges_plugin(), name="judging")
    try:
        bare = CliRunner().invoke(cli, ["list"])
        listed = CliRunner().invoke(cli, ["list", "judges"])
    finally:
        reset_plugin_manager()
    assert "  judges" in bare.output, bare.output
    assert listed.exit_code == 0 and "strict" in listed.output and "[judging]" in listed.output


def test_a_backend_configured_by_a_class_off_its_sections_base_is_refused() -> None:
    class Plugin:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_rollout_backends(register):  # type: ignore[no-untyped-def]
            register("junkroll", _thing, config_cls=_Cfg)

    pm = build_plugin_manager([("junk", Plugin)], load_entry_points=False)
    # Before: accepted, and a run said "unknown config key 'rollout.backend'" (the user's key).
    assert "junkroll" not in pm.registry("rollout_backends")
    info = pm.plugin_info("junk")
    assert info is not None and "; expected a RolloutConfig" in (info.error or "")


@attrs.frozen(kw_only=True)
class _NotesConfig:
    """Where the notes go."""

    file: str  # no default: every run's section would fail to build


@pytest.mark.parametrize(
    ("kind", "register_args"),
    [
        ("config_sections", ("notes", _NotesConfig)),
        ("rollout_sections", ("notes", _NotesConfig)),
        ("policy_losses", ("notes", _thing, _NotesConfig)),
    ],
)
def test_a_config_class_with_a_field_without_a_default_drops_its_plugin(
    kind: str, register_args: tuple
) -> None:
    def impl(register):  # type: ignore[no-untyped-def]
        name, thing, *cls = register_args
        register(name, thing, **({"config_cls": cls[0]} if cls else {}))

    class Plugin:
        pass

    impl.__name__ = REGISTRY_HOOKS[kind]
    setattr(Plugin, impl.__name__, staticmethod(hfsdk.hookimpl(impl)))
    pm = build_plugin_manager([("notesnd", Plugin)], load_entry_points=False)
    # Before: registered; every run then failed with "bad value for config key 'notes.file'".
    assert "notes" not in pm.registry(kind)
    info = pm.plugin_info("notesnd")
    assert info is not None and info.status == "failed"
    assert "plugin 'notesnd' registered" in (info.error or "")
    assert "with a default on every field (not on ['file'])" in (info.error or "")


@pytest.mark.parametrize("kind", ["reward_functions", "rollout_corrections"])
def test_a_config_set_per_entry_may_require_a_key(kind: str) -> None:
    """Its keys are set per entry of reward.functions (the remote reward's url) or of
    rollout_correction.apply (a correction's threshold), never built with no input."""
    registry = Registry(kind)
    registry._add("notes", _thing, plugin="p", config_cls=_NotesConfig)
    assert registry["notes"].config_cls is _NotesConfig
