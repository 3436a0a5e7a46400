"""Run config: YAML + overrides round trip, composition by name, every class of bad input."""

from __future__ import annotations

import pickle
import re
import shlex
from pathlib import Path

import attrs
import pytest
import yaml

import hfsdk
from hfsdk.core.algorithm import AlgorithmConfig
from hfsdk.core.config import load_run_config, resolve_run_config
from hfsdk.core.config.loader import apply_overrides, load_yaml, parse_override
from hfsdk.core.errors import ConfigError
from hfsdk.core.plugin_manager import HfsdkPluginManager, build_plugin_manager
from hfsdk.core.role_config import RoleConfig, RolloutConfig


@attrs.frozen(kw_only=True)
class ToyAlgoConfig(AlgorithmConfig):
    advantage_estimator: str = "plain"
    policy_loss: str = "pg"
    kl_estimator: str = "k1"
    value_loss: str = "mse"
    horizon: int = attrs.field(default=4, validator=attrs.validators.ge(1))


@attrs.frozen(kw_only=True)
class PlainConfig:
    scale: float = 1.0


@attrs.frozen(kw_only=True)
class WhitenedConfig:
    eps: float = attrs.field(default=1e-6, validator=attrs.validators.gt(0.0))


@attrs.frozen(kw_only=True)
class Optim:
    lr: float = attrs.field(default=1e-5, validator=attrs.validators.gt(0.0))
    betas: tuple[float, float] = (0.9, 0.999)


@attrs.frozen(kw_only=True)
class ToyRole(RoleConfig):
    backend: str = "toy"
    optim: Optim = attrs.field(factory=Optim)
    micro_batch_size: int = 2


@attrs.frozen(kw_only=True)
class ToyRollout(RolloutConfig):
    backend: str = "toygen"
    temperature: float = 1.0


class ToyAlgo:
    """A toy algorithm."""


class ToyPlugin:
    @staticmethod
    @hfsdk.hookimpl
    def hfsdk_register_algorithms(register):  # type: ignore[no-untyped-def]
        spec = hfsdk.AlgorithmSpec(
            name="toy",
            program=ToyAlgo,
            config_cls=ToyAlgoConfig,
            roles=[("actor", "policy"), ("critic", "value"), ("reward", "scorer")],
        )
        register(spec.name, spec)

    @staticmethod
    @hfsdk.hookimpl
    def hfsdk_register_advantage_estimators(register):  # type: ignore[no-untyped-def]
        register("plain", len, config_cls=PlainConfig)
        register("whitened", len, config_cls=WhitenedConfig)

    @staticmethod
    @hfsdk.hookimpl
    def hfsdk_register_policy_losses(register):  # type: ignore[no-untyped-def]
        register("pg", len)

    @staticmethod
    @hfsdk.hookimpl
    def hfsdk_register_value_losses(register):  # type: ignore[no-untyped-def]
        register("mse", len)

    @staticmethod
    @hfsdk.hookimpl
    def hfsdk_register_kl_estimators(register):  # type: ignore[no-untyped-def]
        register("k1", len)  # the default algorithm.kl_estimator (a plugin's, not the core's)

    @staticmethod
    @hfsdk.hookimpl
    def hfsdk_register_training_backends(register):  # type: ignore[no-untyped-def]
        register("toy", object, config_cls=ToyRole, default_for=("policy", "value"))

    @staticmethod
    @hfsdk.hookimpl
    def hfsdk_register_rollout_backends(register):  # type: ignore[no-untyped-def]
        register("toygen", object, config_cls=ToyRollout, default=True)


@pytest.fixture
def pm() -> HfsdkPluginManager:
    return build_plugin_manager([("toy", ToyPlugin)], load_entry_points=False)


def _resolve(pm: HfsdkPluginManager, *overrides: str, data: dict | None = None):
    base = {
        "actor": {"backend": "toy"},
        "critic": {"backend": "toy"},
        "rollout": {"backend": "toygen"},
    }
    return resolve_run_config("toy", apply_overrides({**base, **(data or {})}, overrides), pm=pm)


def test_defaults_and_overrides_compose_by_name(pm: HfsdkPluginManager) -> None:
    cfg = _resolve(pm, "actor.optim.lr=1e-6", "algorithm.horizon=8", "rollout.temperature=0.5")
    assert cfg.actor.optim.lr == pytest.approx(1e-6)
    assert cfg.algorithm.horizon == 8
    assert cfg.rollout.temperature == 0.5
    assert isinstance(cfg.advantage, PlainConfig)
    assert cfg.critic.optim.lr == pytest.approx(1e-5)
    assert cfg.trainer.total_steps >= 1 and cfg.placement.pool_of("actor") == "global"


def test_sections_without_a_backend_get_the_declared_default(pm: HfsdkPluginManager) -> None:
    cfg = resolve_run_config("toy", {}, pm=pm)
    assert isinstance(cfg.actor, ToyRole) and cfg.actor.backend == "toy"
    assert isinstance(cfg.rollout, ToyRollout) and cfg.rollout.backend == "toygen"


def test_no_default_backend_is_a_one_line_error() -> None:
    class NoDefaults(ToyPlugin):
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_training_backends(register):  # type: ignore[no-untyped-def]
            register("toy", object, config_cls=ToyRole)

    pm = build_plugin_manager([("toy", NoDefaults)], load_entry_points=False)
    with pytest.raises(ConfigError, match="declares itself the default for role kind 'policy'"):
        resolve_run_config("toy", {}, pm=pm)


def test_selecting_another_estimator_switches_its_section_class(pm: HfsdkPluginManager) -> None:
    cfg = _resolve(pm, "algorithm.advantage_estimator=whitened", "advantage.eps=0.5")
    assert cfg.advantage == WhitenedConfig(eps=0.5)
    with pytest.raises(ConfigError, match=r"unknown config key 'advantage.scale'"):
        _resolve(pm, "algorithm.advantage_estimator=whitened", "advantage.scale=2")


@attrs.frozen(kw_only=True)
class ToyPairsConfig(hfsdk.TrainerAlgorithmConfig):
    margin: float = 0.0


@attrs.frozen(kw_only=True)
class ToyNoCriticConfig(AlgorithmConfig):
    advantage_estimator: str | None = None
    policy_loss: str = "pg"


class ToyUnusedSections(ToyPlugin):
    @staticmethod
    @hfsdk.hookimpl
    def hfsdk_register_algorithms(register):  # type: ignore[no-untyped-def]
        ToyPlugin.hfsdk_register_algorithms(register)
        for name, config_cls in (("pairs", ToyPairsConfig), ("nocritic", ToyNoCriticConfig)):
            spec = hfsdk.AlgorithmSpec(
                name=name, program=ToyAlgo, config_cls=config_cls, roles=[("actor", "policy")]
            )
            register(spec.name, spec)


@pytest.mark.parametrize(
    ("algo", "override", "why"),
    [
        ("pairs", "policy_loss.clip=0.2", "'pairs' trains no policy"),
        ("pairs", "advantage.scale=2", "'pairs' trains no policy"),
        ("pairs", "value_loss.clip=0.2", "'pairs' trains no policy"),
        ("nocritic", "advantage.scale=2", "'nocritic' estimates no advantages"),
        ("nocritic", "value_loss.clip=0.2", "'nocritic' trains no critic"),
    ],
)
def test_settings_of_a_section_the_algorithm_never_uses_are_refused(
    algo: str, override: str, why: str
) -> None:
    # They used to be dropped without a word (the section was "known" to every algorithm).
    pm = build_plugin_manager([("toy", ToyUnusedSections)], load_entry_points=False)
    data = apply_overrides({"actor": {"backend": "toy"}}, [override])
    with pytest.raises(ConfigError) as caught:
        resolve_run_config(algo, data, pm=pm)
    message = str(caught.value)
    key = override.partition("=")[0]
    assert message.startswith(f"{key}: algorithm {why}") and "\n" not in message
    assert message.endswith("remove them")
    # An empty section (what `config show` of another algorithm may carry) sets nothing.
    section = key.partition(".")[0]
    assert resolve_run_config(algo, {"actor": {"backend": "toy"}, section: {}}, pm=pm)


def test_yaml_round_trip(tmp_path: Path, pm: HfsdkPluginManager) -> None:
    cfg = _resolve(pm, "actor.optim.lr=3e-4", "reward.functions=[{name: exact, weight: 0.5}]")
    path = tmp_path / "run.yaml"
    path.write_text(cfg.to_yaml())
    again = resolve_run_config(None, load_yaml(path), pm=pm)
    assert again == cfg
    assert again.reward.functions[0].name == "exact"
    assert again.reward.functions[0].weight == 0.5
    assert yaml.safe_load(path.read_text())["algo"] == "toy"


def test_run_config_pickles(pm: HfsdkPluginManager) -> None:
    cfg = _resolve(pm, "actor.micro_batch_size=3")
    assert pickle.loads(pickle.dumps(cfg)) == cfg


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "actor.optim.lrr=1",
            "unknown config key 'actor.optim.lrr'; did you mean 'actor.optim.lr'?",
        ),
        (
            "actor.optim.learning_rate=1e-5",  # TRL's / transformers' name of the field
            "unknown config key 'actor.optim.learning_rate'; did you mean 'actor.optim.lr'?",
        ),
        ("actor.optim.lr=-1", "bad value for config key 'actor.optim.lr': must be > 0.0"),
        ("actor.micro_batch_size=1.5", "'actor.micro_batch_size': expected an integer, got 1.5"),
        ("actor.micro_batch_size=[1]", "'actor.micro_batch_size': expected an integer"),
        ("algorithm.kl_controller=pid", "bad value 'pid' for config key 'algorithm.kl_controller'"),
        (
            "algorithm.policy_loss=pgg",
            "unknown policy loss 'pgg'; available: pg; did you mean 'pg'?",
        ),
        ("actor.backend=toyy", "config key 'actor.backend': unknown training backend 'toyy'"),
        (
            "actr.optim.lr=1",
            "unknown config section 'actr' for algorithm 'toy'; did you mean 'actor'",
        ),
        ("trainer.loggers=[console, slack]", "unknown logger 'slack'"),
        ("trainer.loggers=[jsonl, jsonl]", "lists 'jsonl' 2 times; list each logger once"),
        ("placement.roles.actor=gpu", "maps 'actor' to pool 'gpu', which is not defined"),
        ("placement.roles.judge=global", "placement.roles names 'judge', which is not a role"),
        ("reward.functions=[{weight: 1}]", "reward.functions[0]"),
        (  # a bare name was told "leave it out to keep its defaults"
            "reward.functions=[exact_match]",
            "config entry 'reward.functions[0]' is the string 'exact_match', not a mapping; "
            "write it as {name: exact_match}",
        ),
        ("actor.optim.betas=[0.9, x]", "actor.optim.betas[1]"),
        ("algorithm=3", "config section 'algorithm' must be a mapping"),
        ("actor.optim=null", "config section 'actor.optim' must be a mapping of keys to values"),
        ("actor.optim=[1]", "config section 'actor.optim' must be a mapping of keys to values"),
        ("actor.optim=adam", "config section 'actor.optim' must be a mapping of keys to values"),
    ],
)
def test_bad_input_names_key_value_and_allowed(
    pm: HfsdkPluginManager, override: str, message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        _resolve(pm, override)
    assert message in str(info.value)


def test_all_problems_are_reported_together(pm: HfsdkPluginManager) -> None:
    with pytest.raises(ConfigError) as info:
        _resolve(pm, "actor.optim.lr=-1", "critic.micro_batch_size=x")
    assert "actor.optim.lr" in str(info.value) and "critic.micro_batch_size" in str(info.value)


def test_unknown_algorithm_lists_available(pm: HfsdkPluginManager) -> None:
    with pytest.raises(ConfigError, match=r"unknown algorithm 'tyo'; available: toy; did you"):
        resolve_run_config("tyo", {}, pm=pm)
    with pytest.raises(ConfigError, match="no algorithm given; pass --algo NAME"):
        resolve_run_config(None, {}, pm=pm)


def test_validate_config_hook_can_veto(pm: HfsdkPluginManager) -> None:
    class Veto:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_validate_config(config):  # type: ignore[no-untyped-def]
            if config.actor.micro_batch_size > 2:
                return ["actor.micro_batch_size must be at most 2 for the toy backend"]
            return None

    pm.pm.register(Veto, name="veto")
    _resolve(pm)
    with pytest.raises(ConfigError, match="at most 2 for the toy backend"):
        _resolve(pm, "actor.micro_batch_size=4")


def test_a_validator_answering_a_string_or_raising_is_named(pm: HfsdkPluginManager) -> None:
    class Sentence:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_validate_config(config):  # type: ignore[no-untyped-def]
            return "one whole sentence"  # a list was asked for

    pm.pm.register(Sentence, name="sentence")
    # Before: "o; n; e; ..." (the string iterated letter by letter).
    with pytest.raises(ConfigError, match=r"^one whole sentence$"):
        _resolve(pm)
    pm.pm.unregister(name="sentence")

    class Crashes:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_validate_config(config):  # type: ignore[no-untyped-def]
            raise ValueError("validator crashed")

    pm.pm.register(Crashes, name="crashes")
    # Before: an hfsdk internal error naming no plugin.
    with pytest.raises(ConfigError, match=r"^plugin 'crashes'.s hfsdk_validate_config raised V"
                       r"alueError: validator crashed; fix or disable it \(HFSDK_DISABLE_PLUGINS="
                       r"crashes\)$"):  # fmt: skip
        _resolve(pm)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("no_equals", "not of the form key.sub=value"),
        ("a..b=1", "not of the form"),
        ("a=[unclosed", "is not valid YAML"),
    ],
)
def test_bad_override_syntax(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_override(text)


@pytest.mark.parametrize("text", ["trainer.loggers=[jsonl,", "reward.functions=[{name:"])
def test_an_override_the_shell_split_at_a_space_says_to_quote_it(text: str) -> None:
    # `key=[a, b]` unquoted reaches hfsdk as `key=[a,` and `b]`: the YAML error alone misleads.
    with pytest.raises(ConfigError, match=r"split by the shell at a space: quote the whole"):
        parse_override(text)


@pytest.mark.parametrize(
    ("text", "parsed", "quoted"),
    [
        ("wandb.name=run #3", "'run'", "wandb.name='\"run #3\"'"),
        ("trainer.val_answer_pattern=#### (\\d+)", "null", "'\"#### (\\\\d+)\"'"),
        ("wandb.name=#1", "null", "wandb.name='\"#1\"'"),
    ],
)
def test_a_hash_in_an_override_value_is_not_silently_a_comment(
    text: str, parsed: str, quoted: str
) -> None:
    # Before: YAML read ` #3` as a comment (name 'run') and a leading `#` as null, silently.
    with pytest.raises(ConfigError) as info:
        parse_override(text)
    message = str(info.value)
    assert message.startswith(f"override {text!r}: YAML reads '#' as a comment, so the value ")
    assert f"would be {parsed}; quote it: " in message and message.endswith(quoted)
    suggestion = message.rpartition("quote it: ")[2]  # what the shell passes on
    assert parse_override("".join(shlex.split(suggestion)))[1] == text.partition("=")[2]


@pytest.mark.parametrize("text", ["a.b=x#y", 'a.b="run #3"', "a.b='#1'", "a.b={c: '#d'}"])
def test_a_hash_yaml_keeps_in_an_override_value_is_fine(text: str) -> None:
    assert "#" in str(parse_override(text)[1])


def test_override_through_a_value_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"'a\.b' is a value"):
        apply_overrides({"a": {"b": 1}}, ["a.b.c=2"])


def test_yaml_file_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_yaml(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\n")
    with pytest.raises(ConfigError, match="is not valid YAML"):
        load_yaml(bad)
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("3\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_yaml(scalar)


def test_a_pool_override_updates_that_pool_only() -> None:
    from hfsdk.core.config import load_run_config

    config = load_run_config("grpo", None, ["placement.pools.rollout.devices=1"])
    assert sorted(config.placement.pools) == ["global", "rollout"]
    assert config.placement.pools["global"].devices == 1
    config = load_run_config(
        "grpo", None, ["placement.pools.global.devices=2", "placement.pools.global.nodes=1"]
    )
    assert sorted(config.placement.pools) == ["global"]
    assert config.placement.pools["global"].devices == 2
    # A whole map given as one value still replaces the default.
    config = load_run_config("grpo", None, ["placement.pools={gpu: {devices: 1}}"])
    assert sorted(config.placement.pools) == ["gpu"]


def test_a_pool_override_keeps_the_pools_of_a_config_file(tmp_path: Path) -> None:
    from hfsdk.core.config import load_run_config

    path = tmp_path / "c.yaml"
    path.write_text("placement:\n  pools:\n    train: {devices: 1}\n  roles: {actor: train}\n")
    config = load_run_config("grpo", str(path), ["placement.pools.rollout.devices=1"])
    assert sorted(config.placement.pools) == ["rollout", "train"]


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["data.max_prompt_length=40"], 40),
        (["rollout.max_prompt_length=40"], 40),  # older configs: the rollout key sets both
        (["data.max_prompt_length=40", "rollout.max_prompt_length=40"], 40),
        (["data.max_prompt_length=30", "data.max_prompt_length=40"], 40),
        ([], 64),
    ],
)
def test_the_prompt_length_is_one_setting(overrides: list[str], expected: int) -> None:
    """``data.max_prompt_length`` is the key; the rollout's follows (older configs: either)."""
    from hfsdk.core.config import load_run_config

    config = load_run_config("grpo", None, overrides)
    assert (config.data.max_prompt_length, config.rollout.max_prompt_length) == (
        expected,
        expected,
    )


def test_the_prompt_length_of_a_later_layer_wins_under_either_key(tmp_path: Path) -> None:
    from hfsdk.core.config import load_run_config

    path = tmp_path / "c.yaml"
    path.write_text("data: {max_prompt_length: 48}\n")
    config = load_run_config("grpo", str(path), ["rollout.max_prompt_length=32"])
    assert (config.data.max_prompt_length, config.rollout.max_prompt_length) == (32, 32)
    config = load_run_config("grpo", None, [], base={"rollout": {"max_prompt_length": 24}})
    assert (config.data.max_prompt_length, config.rollout.max_prompt_length) == (24, 24)
    with pytest.raises(ConfigError, match=r"the command line: .* disagree"):
        load_run_config(
            "grpo", str(path), ["data.max_prompt_length=8", "rollout.max_prompt_length=9"]
        )


@pytest.mark.parametrize("value", ["abc", "true", "[1]"])
def test_a_prompt_length_that_is_no_number_beside_the_rollout_key_is_named(value: str) -> None:
    # Before: "TypeError: can only concatenate str (not "int") to str" (the sum ran first).
    overrides = [f"data.max_prompt_length={value}", "rollout.max_prompt_length=10"]
    with pytest.raises(ConfigError, match=r"'data\.max_prompt_length': expected"):
        load_run_config("grpo", None, overrides)


def test_yaml_and_override_edges_a_user_meets(tmp_path: Path) -> None:
    base = load_run_config("grpo")
    empty = tmp_path / "empty_section.yaml"
    empty.write_text("actor:\n  # lr set later\nrollout:\n")
    # Before: the empty sections replaced the presets' (lr 1e-4 -> 1e-5, responses 8 -> 32).
    assert load_run_config("grpo", str(empty)) == base
    for override, needle in [
        ("wandb.name=0755", "'wandb.name': expected a string, got the number 493; quote"),
        ("trainer.seed=-5", "'trainer.seed': must be >= 0"),
        ("data.train_files=", "'data.train_files': expected a list of strings, got None"),
    ]:  # before: '493', an internal error at the run's start, ('',)
        with pytest.raises(ConfigError, match=re.escape(needle)):
            load_run_config("grpo", None, [override])
    numeric = tmp_path / "numeric_key.yaml"
    numeric.write_text("actor:\n  1: 2\n  bogus: 3\n")
    with pytest.raises(ConfigError, match=r"unknown config key 'actor\.1'"):  # was a TypeError
        load_run_config("grpo", str(numeric))
    tab = tmp_path / "tab.yaml"
    tab.write_text("actor:\n\toptim: 1\n")
    with pytest.raises(ConfigError, match=r"found character '\\t' .* line 2, column 1"):
        load_run_config("grpo", str(tab))  # the position was cut off with the second line
    assert load_run_config("grpo", "/dev/null") == base  # was "does not exist"


@pytest.mark.parametrize(
    "override, shown",
    [("reward.functions=exact_match", "'exact_match'"), ("actor.optim.betas=0.9", "0.9"),
     ("actor.optim.betas=ab", "'ab'"), ("reward.functions={name: exact_match}", "{'name'")],
)  # fmt: skip
def test_a_scalar_or_a_string_for_a_list_is_one_error(override: str, shown: str) -> None:
    """A string for a list was structured character by character: 11 errors for
    'exact_match', and a float for a pair was Python's 'has no len()'."""
    with pytest.raises(ConfigError) as info:
        load_run_config("grpo", None, [override])
    key = override.split("=")[0]
    assert str(info.value).startswith(f"bad value for config key {key!r}: expected a list")
    assert shown in str(info.value) and ";" not in str(info.value)
    assert load_run_config("grpo", None, ["trainer.loggers=jsonl"]).trainer.loggers == ("jsonl",)


def test_an_algo_in_the_file_or_an_override_that_differs_from_algo_is_one_error(
    tmp_path: Path,
) -> None:
    """--algo won silently: a file's PPO keys were errors for GRPO with no word of the file's
    algo, and ``algo=nonexist`` was accepted."""
    path = tmp_path / "ppo.yaml"
    path.write_text("algo: ppo\ncritic:\n  optim:\n    lr: 1.0e-5\n")
    for config_file, overrides, given in [(str(path), [], "ppo"), (None, ["algo=nope"], "nope")]:
        with pytest.raises(ConfigError) as info:
            load_run_config("grpo", config_file, overrides)
        message = str(info.value)
        assert (
            f"--algo 'grpo' disagrees with algo: {given!r}" in message and "critic" not in message
        )
        assert "drop one of them" in message
    path.write_text("algo: grpo\n")  # the same algorithm twice is fine
    assert load_run_config("grpo", str(path), ["algo=grpo"]).algo == "grpo"


def test_a_list_for_a_map_says_a_mapping_is_expected() -> None:
    """Python's "'list' object has no attribute 'items' (expected dict)" leaked."""
    with pytest.raises(ConfigError) as info:
        load_run_config("grpo", None, ["placement.pools=[1]"])
    assert str(info.value) == (
        "bad value for config key 'placement.pools': expected a mapping {key: value}, got a list"
    )


def test_a_bad_prompt_length_is_reported_under_the_users_key_only() -> None:
    """rollout.max_prompt_length, derived from it, was reported too."""
    with pytest.raises(ConfigError) as info:
        load_run_config("grpo", None, ["data.max_prompt_length=0"])
    assert "'data.max_prompt_length'" in str(info.value)
    assert "rollout.max_prompt_length" not in str(info.value)


def test_a_later_layer_wins_over_the_old_wandb_spelling(tmp_path: Path) -> None:
    """``trainer.wandb.project`` on the command line lost to the file's ``wandb.project``:
    the new spelling won whatever its layer."""
    from hfsdk.core.config.sources import ConfigLayers

    path = tmp_path / "w.yaml"
    path.write_text("wandb:\n  project: from_file\n  name: kept\n")
    config = load_run_config("grpo", str(path), ["trainer.wandb.project=from_cli"])
    assert (config.sections["wandb"].project, config.sections["wandb"].name) == ("from_cli", "kept")
    sources = ConfigLayers.read("grpo", str(path), ["trainer.wandb.project=from_cli"]).sources()
    assert sources["wandb.project"] == "command line" and sources["wandb.name"] == f"file {path}"


def test_a_prompt_length_in_a_rollout_mapping_override_is_converted_too() -> None:
    """``rollout={max_prompt_length: 100}`` kept the preset's data.max_prompt_length (64):
    ``config show`` printed what ``hfsdk run`` refuses."""
    config = load_run_config("grpo", None, ["rollout={max_prompt_length: 100, top_k: 5}"])
    assert (config.data.max_prompt_length, config.rollout.max_prompt_length) == (100, 100)
    assert config.rollout.top_k == 5
