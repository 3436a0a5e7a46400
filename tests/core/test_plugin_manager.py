"""Plugin discovery through real entry points, load/disable lists, broken plugins, tracing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import hfsdk
from hfsdk.core.plugin_manager import build_plugin_manager

from ..conftest import make_distribution, run_python

GOOD = """
import hfsdk

def shout(prompts, responses, **columns):
    '''Reward 1 for responses in capitals.'''
    return [float(r.isupper()) for r in responses]

@hfsdk.hookimpl
def hfsdk_register_reward_functions(register):
    register("shout", shout)
"""

BROKEN = """
raise RuntimeError("this plugin is broken on purpose")
"""

REPORT = """
import json, sys
import hfsdk
from hfsdk.core.plugin_manager import get_plugin_manager
infos = {p.name: p.to_dict() for p in get_plugin_manager().plugins}
names = sorted(hfsdk.get_registry("reward_functions"))
print(json.dumps({"plugins": infos, "rewards": names, "torch": "torch" in sys.modules}))
"""


@pytest.fixture
def site(tmp_path: Path) -> Path:
    make_distribution(tmp_path, "hfsdk-test-good", "goodplug", "hfsdk_test_good", GOOD)
    make_distribution(tmp_path, "hfsdk-test-broken", "brokenplug", "hfsdk_test_broken", BROKEN)
    return tmp_path


def _report(site: Path, **env: str) -> dict:
    result = run_python(REPORT, path=site, env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_entry_points_are_discovered_and_a_broken_plugin_is_reported(site: Path) -> None:
    report = _report(site)
    good = report["plugins"]["goodplug"]
    assert good["status"] == "loaded"
    assert good["distribution"] == "hfsdk-test-good" and good["version"] == "0.1.0"
    assert good["hooks"] == ["hfsdk_register_reward_functions"]
    broken = report["plugins"]["brokenplug"]
    assert broken["status"] == "failed"
    assert broken["distribution"] == "hfsdk-test-broken"
    assert "RuntimeError: this plugin is broken on purpose" in broken["error"]
    assert "shout" in report["rewards"]
    # the repo's own plugins still load next to the broken one
    assert report["plugins"]["ppo"]["status"] == "loaded"


def test_disable_list_blocks_plugins(site: Path) -> None:
    report = _report(site, HFSDK_DISABLE_PLUGINS="goodplug,brokenplug")
    assert report["plugins"]["goodplug"]["status"] == "disabled"
    assert report["plugins"]["brokenplug"]["status"] == "disabled"
    assert "shout" not in report["rewards"]


def test_load_list_loads_only_those(site: Path) -> None:
    report = _report(site, HFSDK_LOAD_PLUGINS="goodplug")
    assert report["plugins"]["goodplug"]["status"] == "loaded"
    assert report["plugins"]["ppo"]["status"] == "disabled"
    assert report["plugins"]["hfsdk"]["status"] == "loaded"  # built-ins always load
    assert report["rewards"] == ["shout"] or "shout" in report["rewards"]


def test_trace_prints_hook_calls(site: Path) -> None:
    result = run_python(REPORT, path=site, env={"HFSDK_TRACE_PLUGINS": "1"})
    assert result.returncode == 0, result.stderr
    assert "hfsdk_register_reward_functions -> plugin 'goodplug'" in result.stderr


def test_listing_plugins_does_not_import_torch(site: Path) -> None:
    code = """
    import json, sys
    from hfsdk.core.plugin_manager import get_plugin_manager
    get_plugin_manager()
    print(json.dumps("torch" in sys.modules or "ray" in sys.modules))
    """
    result = run_python(code, path=site)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip()) is False


def test_registration_hook_that_raises_drops_only_that_plugin() -> None:
    class Bad:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_reward_functions(register):  # type: ignore[no-untyped-def]
            register("half_done", len)
            raise RuntimeError("boom")

    class Good:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_reward_functions(register):  # type: ignore[no-untyped-def]
            register("fine", len)

    pm = build_plugin_manager([("bad", Bad), ("good", Good)], load_entry_points=False)
    registry = pm.registry("reward_functions")
    assert "fine" in registry and "half_done" not in registry
    info = pm.plugin_info("bad")
    assert info is not None and info.status == "failed" and "boom" in (info.error or "")


def test_unknown_hook_name_marks_plugin_failed() -> None:
    class Typo:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_reward_function(register):  # type: ignore[no-untyped-def]
            pass

    pm = build_plugin_manager([("typo", Typo)], load_entry_points=False)
    info = pm.plugin_info("typo")
    assert info is not None and info.status == "failed"
    assert "hfsdk_register_reward_function" in (info.error or "")


def test_an_optional_hook_of_an_absent_plugin_does_not_fail_the_plugin() -> None:
    class Extends:
        @staticmethod
        @hfsdk.hookimpl(optionalhook=True)
        def hfsdk_register_things_of_an_absent_plugin(register):  # type: ignore[no-untyped-def]
            pass

    pm = build_plugin_manager([("extends", Extends)], load_entry_points=False)
    info = pm.plugin_info("extends")
    assert info is not None and (info.status, info.error) == ("loaded", None)


def test_a_hook_of_an_absent_plugin_without_optionalhook_says_to_mark_it() -> None:
    class Extends:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_things_of_an_absent_plugin(register):  # type: ignore[no-untyped-def]
            pass

    pm = build_plugin_manager([("extends", Extends)], load_entry_points=False)
    info = pm.plugin_info("extends")
    assert info is not None and info.status == "failed"
    # Before: "hook names start with hfsdk_", which this name already does.
    assert "hook names start with" not in (info.error or "")
    assert "a hook of a plugin not loaded here" in (info.error or "")
    assert "optionalhook=True" in (info.error or "")


def test_a_registry_kind_clash_fails_the_later_plugin_only_and_names_both() -> None:
    class First:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_registry_kinds(register):  # type: ignore[no-untyped-def]
            register("judges", "hfsdk_register_reward_functions")

    class Second:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_registry_kinds(register):  # type: ignore[no-untyped-def]
            register("graders", "hfsdk_register_reward_functions")
            register("judges", "hfsdk_register_reward_functions")

        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_reward_functions(register):  # type: ignore[no-untyped-def]
            register("from_second", len)

    pm = build_plugin_manager([("first", First), ("second", Second)], load_entry_points=False)
    # Before: HfsdkError out of every command, blaming 'first' (pluggy calls 'second' first).
    kinds = pm.registry_kinds()
    assert "judges" in kinds and "graders" not in kinds
    assert pm.plugin_info("first").status == "loaded"  # type: ignore[union-attr]
    info = pm.plugin_info("second")
    assert info is not None and info.status == "failed"
    assert "plugin 'second' adds registry kind 'judges', which plugin 'first' already has" in (
        info.error or ""
    )
    assert "from_second" not in pm.registry("reward_functions")


def test_addhooks_lets_a_plugin_add_hook_specs() -> None:
    import pluggy

    spec = pluggy.HookspecMarker("hfsdk")

    class Specs:
        @staticmethod
        @spec
        def hfsdk_custom_hook(value: int) -> int:  # type: ignore[empty-body]
            """A hook a plugin adds."""

    class Adder:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_addhooks(pluginmanager):  # type: ignore[no-untyped-def]
            pluginmanager.add_hookspecs(Specs)

    class User:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_custom_hook(value):  # type: ignore[no-untyped-def]
            return value * 2

    pm = build_plugin_manager([("adder", Adder), ("user", User)], load_entry_points=False)
    assert pm.hook.hfsdk_custom_hook(value=21) == [42]
    assert pm.plugin_info("user").status == "loaded"  # type: ignore[union-attr]


def test_registry_hooks_are_called_through_pluggy_in_its_order() -> None:
    calls: list[str] = []
    wrapped: list[object] = []

    class First:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_reward_functions(register):  # type: ignore[no-untyped-def]
            calls.append("first")
            register("from_first", len)

    class Second:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_reward_functions(register):  # type: ignore[no-untyped-def]
            calls.append("second")
            register("from_second", len)

    class Wrapper:
        @staticmethod
        @hfsdk.hookimpl(wrapper=True)
        def hfsdk_register_reward_functions(register):  # type: ignore[no-untyped-def]
            wrapped.append(register)
            return (yield)

    pm = build_plugin_manager(
        [("first", First), ("second", Second), ("wrapper", Wrapper)], load_entry_points=False
    )
    monitored: list[str] = []
    pm.pm.add_hookcall_monitoring(lambda name, impls, kwargs: monitored.append(name),
                                  lambda outcome, name, impls, kwargs: None)  # fmt: skip
    registry = pm.registry("reward_functions")
    # pluggy's order (the last registered first), not registration order as before.
    assert calls == ["second", "first"]
    assert registry["from_first"].plugin == "first" and registry["from_second"].plugin == "second"
    # The wrapper and pluggy's call monitoring saw every plugin's call (the core registers
    # no reward function: the standard ones are the rewards plugin's).
    assert len(wrapped) == 2 and monitored == ["hfsdk_register_reward_functions"] * 2


def test_a_duplicate_name_has_no_winner_and_names_both_plugins() -> None:
    class One:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_reward_functions(register):  # type: ignore[no-untyped-def]
            register("score", len)

    class Two:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_reward_functions(register):  # type: ignore[no-untyped-def]
            register("score", max)

    pm = build_plugin_manager([("one", One), ("two", Two)], load_entry_points=False)
    with pytest.raises(hfsdk.HfsdkError, match="registered by both plugin 'two' and plugin 'one'"):
        pm.registry("reward_functions")


# A reward package whose plugin module fails to import (issue 34: "shows up only as
# unknown reward function 'concise_sum'").
CONCISE = """
import hfsdk
import a_module_that_is_not_installed  # noqa: F401

@hfsdk.hookimpl
def hfsdk_register_reward_functions(register):
    register("concise_sum", lambda prompts, responses, **columns: [0.0] * len(responses))
"""


@pytest.fixture
def broken_rewards(tmp_path: Path) -> Path:
    make_distribution(tmp_path, "hfsdk-concise", "concise", "hfsdk_concise_plugin", CONCISE)
    return tmp_path


def _cli(site: Path, *args: str) -> tuple[int, str, str]:
    code = f"""
    import sys
    from hfsdk.core.cli.main import main
    main({list(args)!r})
    """
    result = run_python(code, path=site)
    return result.returncode, result.stdout, result.stderr


def test_a_lookup_of_a_missing_name_names_the_plugins_that_failed_to_load(
    broken_rewards: Path,
) -> None:
    code = """
    import hfsdk
    try:
        hfsdk.get_registry("reward_functions")["concise_sum"]
    except hfsdk.UnknownNameError as exc:
        print(exc)
    """
    result = run_python(code, path=broken_rewards)
    assert result.returncode == 0, result.stderr
    line = result.stdout.strip()
    assert "unknown reward function 'concise_sum'" in line
    assert "plugin(s) that failed to load: concise [hfsdk-concise]" in line
    assert "ModuleNotFoundError: No module named 'a_module_that_is_not_installed'" in line


def test_no_failed_plugins_no_note() -> None:
    pm = build_plugin_manager(load_entry_points=False)
    with pytest.raises(hfsdk.UnknownNameError) as info:
        pm.registry("reward_functions")["concise_sum"]
    assert "failed to load" not in str(info.value)


def test_list_and_plugins_show_the_failed_plugin(broken_rewards: Path) -> None:
    code, out, err = _cli(broken_rewards, "list", "reward-functions")
    assert code == 0, err
    assert "exact_match" in out  # the others are listed as before
    assert "concise  [hfsdk-concise]  failed to load: ModuleNotFoundError" in out
    # Before: "(their reward functions are missing)", of every failed plugin, whatever it adds.
    assert "these plugins failed to load; names of this kind may be missing:" in out
    code, out, err = _cli(broken_rewards, "plugins")
    assert code == 0, err
    assert "concise  [failed]  hfsdk-concise 0.1.0" in out
    assert "error: ModuleNotFoundError: No module named 'a_module_that_is_not_installed'" in out


def test_config_show_refuses_a_name_from_a_failed_plugin(broken_rewards: Path) -> None:
    code, out, err = _cli(
        broken_rewards, "config", "show", "--algo", "grpo", "reward.functions=[{name: concise_sum}]"
    )
    assert code == 2, out + err
    assert "Traceback" not in err
    warned, line = err.strip().splitlines()  # the warning at load, then the error
    assert warned.startswith("plugin failed to load: concise [hfsdk-concise]")
    assert "config key 'reward.functions[0].name': unknown reward function 'concise_sum'" in line
    assert "failed to load: concise [hfsdk-concise] (ModuleNotFoundError" in line


def test_a_plugin_named_like_an_installed_one_does_not_silently_replace_it(
    tmp_path: Path,
) -> None:
    make_distribution(tmp_path, "hfsdk-test-clash", "rewards", "hfsdk_test_clash", GOOD)
    # Before: one of the two vanished from the report, and its rewards from every run.
    clash = [p for p in _plugin_rows(tmp_path) if p["name"] == "rewards"]
    assert len(clash) == 2 and {p["status"] for p in clash} == {"loaded", "failed"}
    failed = next(p for p in clash if p["status"] == "failed")
    assert failed["distribution"] == "hfsdk-test-clash"  # hfsdk's own plugin is kept
    assert "has a plugin named 'rewards' too; rename the entry point of" in failed["error"]


@pytest.mark.parametrize("name", ["tasks", "rewards"])
def test_a_third_party_plugin_named_like_a_shipped_one_is_refused_and_the_shipped_one_works(
    tmp_path: Path, name: str
) -> None:
    make_distribution(tmp_path, "other-clash", name, "other_clash", GOOD)
    code = """
    import json
    import hfsdk
    from hfsdk.core.plugin_manager import get_plugin_manager
    tasks, rewards = sorted(hfsdk.get_registry("tasks")), sorted(hfsdk.get_registry("rewards"))
    rows = [p.to_dict() for p in get_plugin_manager().plugins]
    print(json.dumps({"tasks": tasks, "rewards": rewards, "rows": rows}))
    """
    result = run_python(code, path=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    # Before: both were dropped: "no task 'default' is registered" in every run.
    assert "default" in report["tasks"] and "exact_match" in report["rewards"]
    assert "shout" not in report["rewards"]  # the refused plugin registers nothing
    rows = {p["distribution"]: p for p in report["rows"] if p["name"] == name}
    assert rows[f"hfsdk-plugin-{name}"]["status"] == "loaded"
    assert rows["other-clash"]["status"] == "failed"
    assert rows["other-clash"]["error"].endswith("too; rename the entry point of 'other-clash'")


def _plugin_rows(site: Path) -> list[dict]:
    code = """
    import json
    from hfsdk.core.plugin_manager import get_plugin_manager
    print(json.dumps([p.to_dict() for p in get_plugin_manager().plugins]))
    """
    result = run_python(code, path=site)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_plugin_that_exits_at_import_fails_alone_and_typos_in_the_lists_are_said(
    tmp_path: Path,
) -> None:
    make_distribution(
        tmp_path, "hfsdk-test-exits", "exits", "hfsdk_test_exits", "raise SystemExit(0)"
    )
    result = run_python(REPORT, path=tmp_path, env={"HFSDK_DISABLE_PLUGINS": "goodplgu"})
    # Before: the interpreter exited 0 at plugin discovery, and every command did nothing.
    assert result.returncode == 0 and result.stdout, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["plugins"]["exits"]["status"] == "failed"
    assert "SystemExit" in report["plugins"]["exits"]["error"]
    assert "HFSDK_DISABLE_PLUGINS names ['goodplgu'], no installed plugin" in result.stderr


def test_a_plugin_failing_in_one_registry_is_dropped_from_all() -> None:
    class Half:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_reward_functions(register):  # type: ignore[no-untyped-def]
            register("half_reward", len)

        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_advantage_estimators(register):  # type: ignore[no-untyped-def]
            raise RuntimeError("boom")

    pm = build_plugin_manager([("half", Half)], load_entry_points=False)
    assert "half_reward" in pm.registry("reward_functions")
    pm.registry("advantage_estimators")
    # Before: reported failed, yet its reward stayed registered and in use.
    assert "half_reward" not in pm.registry("reward_functions")


HALFWAY = """
import hfsdk

@hfsdk.hookimpl
def hfsdk_register_trackers(register):
    register("halfway", lambda **_: None)
    raise RuntimeError("halfway through registering")
"""


def test_hfsdk_plugins_shows_a_plugin_whose_registration_raised(tmp_path: Path) -> None:
    """Registries fill lazily: `hfsdk plugins --check` fills them first, else such a plugin
    is listed as loaded (with no error) while every lookup says it failed."""
    make_distribution(tmp_path, "hfsdk-test-halfway", "halfway", "hfsdk_test_halfway", HALFWAY)
    code = "from hfsdk.core.cli.main import main; main(['plugins', '--json', '--check'])"
    result = run_python(code, path=tmp_path)
    assert result.returncode == 0, result.stderr
    [info] = [p for p in json.loads(result.stdout) if p["name"] == "halfway"]
    assert info["status"] == "failed" and "halfway through registering" in info["error"]


def test_a_registry_kinds_hook_that_raises_drops_only_that_plugin_and_its_kinds() -> None:
    class KindsBug:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_registry_kinds(register):  # type: ignore[no-untyped-def]
            register("judges", "hfsdk_register_reward_functions")
            import a_module_that_is_not_installed  # noqa: F401

        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_reward_functions(register):  # type: ignore[no-untyped-def]
            register("from_kindsbug", len)

    class Good:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_reward_functions(register):  # type: ignore[no-untyped-def]
            register("fine", len)

    pm = build_plugin_manager([("kindsbug", KindsBug), ("good", Good)], load_entry_points=False)
    # Before: ModuleNotFoundError out of every command ("internal error"), no plugin named.
    assert "judges" not in pm.registry_kinds()
    assert set(pm.registry("reward_functions")) == {"fine"}
    info = pm.plugin_info("kindsbug")
    assert info is not None and info.status == "failed"
    assert info.error == (
        "hfsdk_register_registry_kinds raised ModuleNotFoundError: "
        "No module named 'a_module_that_is_not_installed'"
    )


KINDS_BUG = """
import hfsdk

@hfsdk.hookimpl
def hfsdk_register_registry_kinds(register):
    from my_pkg import my_hookspecs  # not installed
"""


def test_hfsdk_list_works_beside_a_plugin_whose_registry_kinds_hook_raises(
    tmp_path: Path,
) -> None:
    make_distribution(tmp_path, "hfsdk-kindsbug", "kindsbug", "hfsdk_kindsbug", KINDS_BUG)
    code, out, err = _cli(tmp_path, "list", "reward-functions")
    assert code == 0, err
    assert "exact_match" in out
    assert "kindsbug  [hfsdk-kindsbug]  failed to load: hfsdk_register_registry_kinds raised " \
        "ModuleNotFoundError: No module named 'my_pkg'" in out  # fmt: skip


def test_a_plugin_failing_while_another_registry_fills_leaves_nothing_in_it() -> None:
    """A plugin's registration reads another registry, whose fill drops a plugin that has
    already registered into the first one (still being filled, so not yet cached)."""
    managers: list = []

    class Reader:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_reward_functions(register):  # type: ignore[no-untyped-def]
            managers[0].registry("advantage_estimators")  # e.g. to register a variant of one
            register("reader_reward", len)

    class Half:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_reward_functions(register):  # type: ignore[no-untyped-def]
            register("half_reward", len)

        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_advantage_estimators(register):  # type: ignore[no-untyped-def]
            raise RuntimeError("half's estimators are broken")

    # pluggy calls the last registered first: half registers, then reader's read fails half.
    pm = build_plugin_manager([("reader", Reader), ("half", Half)], load_entry_points=False)
    managers.append(pm)
    rewards = pm.registry("reward_functions")
    assert pm.plugin_info("half").status == "failed"  # type: ignore[union-attr]
    # Before: half_reward stayed registered (and in use) from a plugin reported failed.
    assert "half_reward" not in rewards and "reader_reward" in rewards


def test_a_hookimpl_without_the_hfsdk_prefix_marks_the_plugin_failed() -> None:
    class NoPrefix:
        @staticmethod
        @hfsdk.hookimpl
        def register_reward_functions(register):  # type: ignore[no-untyped-def]
            register("shout", len)

    pm = build_plugin_manager([("noprefix", NoPrefix)], load_entry_points=False)
    # Before: loaded, its hook never called, "shout" silently missing.
    info = pm.plugin_info("noprefix")
    assert info is not None and info.status == "failed"
    assert "unknown hook 'register_reward_functions'; hook names start with hfsdk_" in (
        info.error or ""
    )


def test_a_hook_wrapper_that_raises_is_blamed_not_the_plugins_it_wraps() -> None:
    class Wrapper:
        @staticmethod
        @hfsdk.hookimpl(wrapper=True)
        def hfsdk_register_reward_functions(register):  # type: ignore[no-untyped-def]
            yield
            raise RuntimeError("bug in the wrapper")

    class Good:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_reward_functions(register):  # type: ignore[no-untyped-def]
            register("fine", len)

    class Bad:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_reward_functions(register):  # type: ignore[no-untyped-def]
            raise ValueError("bad's own bug")

    plugins = [("good", Good), ("bad", Bad), ("wrapper", Wrapper)]
    pm = build_plugin_manager(plugins, load_entry_points=False)
    registry = pm.registry("reward_functions")
    # Before: good (and every other plugin it wrapped) was dropped and blamed instead.
    assert pm.plugin_info("wrapper").status == "failed"  # type: ignore[union-attr]
    assert "bug in the wrapper" in (pm.plugin_info("wrapper").error or "")  # type: ignore[union-attr]
    assert pm.plugin_info("good").status == "loaded" and "fine" in registry  # type: ignore[union-attr]
    # A plugin whose own implementation raises is still the one blamed.
    assert "bad's own bug" in (pm.plugin_info("bad").error or "")  # type: ignore[union-attr]


@pytest.mark.parametrize("where", ["before", "after"])
def test_the_plugins_a_failing_wrapper_cut_short_keep_their_names(where: str) -> None:
    """A wrapper raising before its yield was blamed, but the plugin it interrupted stayed
    'loaded' with nothing registered; after it, the plugin's names were kept (no repeat)."""

    class Wrapper:
        @staticmethod
        @hfsdk.hookimpl(wrapper=True)
        def hfsdk_register_reward_functions(register):  # type: ignore[no-untyped-def]
            if where == "before":
                raise RuntimeError("bug in the wrapper")
            yield
            raise RuntimeError("bug in the wrapper")

    def good(name: str) -> type:
        class Good:
            @staticmethod
            @hfsdk.hookimpl
            def hfsdk_register_reward_functions(register):  # type: ignore[no-untyped-def]
                register(name, len)

        return Good

    plugins = [("good", good("fine")), ("good2", good("fine2")), ("wrapper", Wrapper)]
    pm = build_plugin_manager(plugins, load_entry_points=False)
    registry = pm.registry("reward_functions")
    assert pm.plugin_info("wrapper").status == "failed"  # type: ignore[union-attr]
    assert "fine" in registry and "fine2" in registry
    assert [p.name for p in pm.failed_plugins()] == ["wrapper"]


def test_plugins_sharing_one_hook_function_blame_the_one_that_raised() -> None:
    def plugin(fails: bool) -> type:
        class Plugin:
            @staticmethod
            @hfsdk.hookimpl
            def hfsdk_register_reward_functions(register):  # type: ignore[no-untyped-def]
                if fails:
                    raise RuntimeError("boom")
                register("ok", len)

        return Plugin

    class Wrapper:
        @staticmethod
        @hfsdk.hookimpl(wrapper=True)
        def hfsdk_register_reward_functions(register):  # type: ignore[no-untyped-def]
            return (yield)

    plugins = [("fails", plugin(True)), ("works", plugin(False)), ("wrapper", Wrapper)]
    pm = build_plugin_manager(plugins, load_entry_points=False)
    assert "ok" in pm.registry("reward_functions")
    assert [p.name for p in pm.failed_plugins()] == ["fails"]


def test_a_multi_line_plugin_error_is_flattened_to_one_line() -> None:
    # The CLI shows only an error's first line: the field, allowed values and fix were lost.
    from hfsdk.core.errors import HfsdkError
    from hfsdk.core.plugin_manager import plugin_code

    with pytest.raises(HfsdkError) as info, plugin_code("p", "x"):
        raise ValueError("1 validation error\n  mode\n    expected online")
    message = str(info.value)
    assert "\n" not in message
    assert "raised ValueError: 1 validation error mode expected online; fix or disable" in message


def test_a_missing_name_names_the_plugins_disabled_by_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """HFSDK_DISABLE_PLUGINS=grpo: "unknown algorithm 'grpo' ...; did you mean 'ppo'?" alone."""
    monkeypatch.setenv("HFSDK_DISABLE_PLUGINS", "grpo")
    pm = build_plugin_manager()
    with pytest.raises(hfsdk.UnknownNameError) as info:
        pm.registry("algorithms")["grpo"]
    assert str(info.value).endswith(
        "; plugin(s) disabled by HFSDK_DISABLE_PLUGINS: grpo (remove them from it, or unset it, "
        "to load them)"
    )


def test_a_plugin_that_fails_to_load_is_warned_about_once(caplog: pytest.LogCaptureFixture) -> None:
    """Before: silent unless a lookup missed one of its names: its config checks, observers
    and preflight checks just did not run."""

    class Typo:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_validate_config(cfg):  # type: ignore[no-untyped-def]
            return ["never said"]

    with caplog.at_level("WARNING", logger="hfsdk.core.plugin_manager"):
        build_plugin_manager([("typo", Typo), ("fine", object())], load_entry_points=False)
    [record] = caplog.records
    assert record.levelname == "WARNING"
    message = record.getMessage()
    assert message.startswith("plugin failed to load: typo [in-process] (PluginValidationError")
    assert "Argument(s) {'cfg'} are declared in the hookimpl" in message
    assert "; none of its hooks run (config checks, observers, preflight checks)" in message
    assert message.endswith("; fix or reinstall it (hfsdk plugins --check)")
    assert "\n" not in message


def test_config_show_warns_about_a_plugin_that_failed_to_load(
    broken_rewards: Path,
) -> None:
    code, out, err = _cli(broken_rewards, "config", "show", "--algo", "grpo")
    assert code == 0, out + err
    [line] = [line for line in err.splitlines() if "concise" in line]
    assert line.startswith("plugin failed to load: concise [hfsdk-concise] (ModuleNotFoundError")
    assert "ModuleNotFoundError: No module named 'a_module_that_is_not_installed'" in line


def test_the_failed_plugins_note_keeps_the_whole_validation_error() -> None:
    class Misspelt:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_reward_functions(reg):  # type: ignore[no-untyped-def]
            reg("argname_fn", len)

    pm = build_plugin_manager([("misspelt", Misspelt)], load_entry_points=False)
    with pytest.raises(hfsdk.UnknownNameError) as info:
        pm.registry("reward_functions")["argname_fn"]
    message = str(info.value)
    # Before: cut after "Plugin 'misspelt' for hook 'hfsdk_register_reward_functions'".
    assert "Argument(s) {'reg'} are declared in the hookimpl but can not be found" in message
    assert "\n" not in message and "hfsdk plugins --check lists them" in message


def test_register_without_an_implementation_names_the_call_and_the_plugin() -> None:
    class NoImpl:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_reward_functions(register):  # type: ignore[no-untyped-def]
            register("lonely")

    pm = build_plugin_manager([("noimpl", NoImpl)], load_entry_points=False)
    pm.registry("reward_functions")
    info = pm.plugin_info("noimpl")
    assert info is not None and info.status == "failed"
    # Before: "TypeError: _register_into() missing 1 required positional argument: 'impl'"
    assert "plugin 'noimpl' called register('lonely'); expected register(name, impl, *, " \
        "config_cls=None, ...)" in (info.error or "")  # fmt: skip


def test_a_bug_in_a_firstresult_hook_names_its_plugin() -> None:
    """Before: ``ValueError: no scorer`` reached the CLI as an internal error naming nobody."""
    from hfsdk.core.reward_scoring import build_reward_scorer

    class Quiet:  # answers None first (tryfirst): the buggy plugin is the next one called
        @staticmethod
        @hfsdk.hookimpl(tryfirst=True)
        def hfsdk_build_reward_scorer(section, config):  # type: ignore[no-untyped-def]
            return None

    class Buggy:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_build_reward_scorer(section, config):  # type: ignore[no-untyped-def]
            raise ValueError(f"no scorer\nfor {section}")

        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_fault_point(point, step):  # type: ignore[no-untyped-def]
            raise hfsdk.HfsdkError("a refusal on purpose")

    pm = build_plugin_manager([("quiet", Quiet), ("buggy", Buggy)], load_entry_points=False)
    with pytest.raises(hfsdk.HfsdkError) as info:
        build_reward_scorer("reward", None, pm)
    assert str(info.value) == (
        "plugin 'buggy''s hfsdk_build_reward_scorer raised ValueError: no scorer for reward; "
        "fix or disable it (HFSDK_DISABLE_PLUGINS=buggy)"
    )
    assert isinstance(info.value.__cause__, ValueError)  # --debug shows the plugin's traceback
    with pytest.raises(hfsdk.HfsdkError, match=r"^a refusal on purpose$"):  # unchanged
        pm.hook.hfsdk_fault_point(point="p", step=0)

    class Stopped:  # a signal's StopNow inside a Ray wait arrives wrapped in a SystemError
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_recorded_generations(config):  # type: ignore[no-untyped-def]
            raise SystemError("<built-in method get> returned a result with an exception set")

    pm = build_plugin_manager([("stopped", Stopped)], load_entry_points=False)
    with pytest.raises(SystemError):  # the trainer's stop handling catches it as it is
        pm.hook.hfsdk_recorded_generations(config=None)
