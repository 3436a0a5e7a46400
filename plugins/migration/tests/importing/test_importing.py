"""``hfsdk config import``: verl and TRL configs mapped key by key, unmapped keys listed, runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from hfsdk.core.cli.main import main
from hfsdk.core.config import resolve_run_config
from hfsdk.core.errors import ConfigError
from hfsdk_migration.importing import import_config, load_source

FIXTURES = Path(__file__).parent / "fixtures"


def _hfsdk(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(list(args))
    out, err = capsys.readouterr()
    return int(info.value.code or 0), out, err


def test_verl_ppo_example_maps_to_ppo() -> None:
    result = import_config("verl", load_source(FIXTURES / "verl_ppo_example.yaml"))
    cfg = resolve_run_config(None, result.config)
    assert cfg.algo == "ppo"
    assert cfg.algorithm.advantage_estimator == "gae"
    assert cfg.algorithm.kl_in_reward and cfg.algorithm.kl_coef == 0.001
    assert cfg.algorithm.kl_estimator == "k1" and cfg.algorithm.kl_loss_coef == 0.0
    assert (cfg.advantage.gamma, cfg.advantage.lam) == (1.0, 1.0)
    assert cfg.data.batch_size == 256 and cfg.data.max_prompt_length == 512
    assert cfg.rollout.max_response_length == 256
    assert cfg.actor.optim.lr == 1e-6 and cfg.critic.optim.lr == 1e-5
    # rollout.n = 1: verl's mini-batch of 64 prompts is 64 responses; the critic inherits it.
    assert cfg.actor.mini_batch_size == 64 and cfg.critic.mini_batch_size == 64
    assert cfg.actor.micro_batch_size == 4 and cfg.actor.forward_micro_batch_size == 8
    assert cfg.value_loss.clip_range_value == 0.5
    assert cfg.policy_loss.clip_ratio_low == cfg.policy_loss.clip_ratio_high == 0.2
    assert cfg.trainer.loggers == ("console", "wandb", "jsonl")
    assert cfg.data.train_files == ("~/data/gsm8k/train.parquet",)
    # Engine, generation tp and offload switches now have counterparts (or are hfsdk's own
    # behaviour when off); what is left is named with its reason.
    assert cfg.rollout.backend == "vllm" and cfg.rollout.gpu_memory_utilization == 0.4
    assert result.config["actor"]["rollout_layout"] == {"tp": 1}
    # verl's project and experiment name the wandb run (verl's logger=[console,wandb]).
    assert (cfg.wandb.project, cfg.wandb.name) == (
        "verl_example_gsm8k", "qwen2.5_0.5b_ppo",
    )  # fmt: skip
    assert result.unmapped == (
        "trainer.total_epochs = 15  (hfsdk counts steps: set trainer.total_steps = total_epochs "
        "x rows // data.train_batch_size (the train files are not here to count))",
    )


def test_verl_grpo_example_maps_to_grpo() -> None:
    result = import_config("verl", load_source(FIXTURES / "verl_grpo_example.yaml"))
    cfg = resolve_run_config(None, result.config)
    assert cfg.algo == "grpo" and cfg.algorithm.n_samples_per_prompt == 5
    # 256 prompts per mini-batch x 5 samples each.
    assert cfg.actor.mini_batch_size == 1280
    assert cfg.algorithm.kl_loss_coef == 0.001 and cfg.algorithm.kl_estimator == "low_var_kl"
    assert not cfg.algorithm.kl_in_reward
    assert cfg.algorithm.loss_agg_mode == "seq-mean-token-sum-norm"
    assert (cfg.policy_loss.clip_ratio_low, cfg.policy_loss.clip_ratio_high) == (0.2, 0.28)
    assert cfg.rollout.top_k == 0 and cfg.rollout.max_response_length == 1024
    assert cfg.trainer.total_steps == 300 and cfg.trainer.save_every == 0
    assert cfg.placement.pools["global"].devices == 8
    function = cfg.reward.functions[0]
    assert (function.name, function.style) == ("my_reward.py:compute_score", "verl")
    # ${data.max_response_length} resolved and mapped; the engine is the vLLM rollout.
    assert cfg.rollout.backend == "vllm"
    assert result.unmapped == ()


def test_verl_defaults_are_assumed_for_keys_left_out() -> None:
    result = import_config("verl", {"algorithm": {"adv_estimator": "gae"}})
    assert result.config["algorithm"]["kl_in_reward"] is False
    assert result.config["advantage"] == {"gamma": 1.0, "lam": 1.0}
    assert result.config["actor"]["optim"]["lr"] == 1e-6
    assert "algorithm.use_kl_in_reward=False" in result.assumed
    assert "verl defaults assumed for" in result.to_yaml()


def test_verl_values_without_counterpart_are_listed_not_guessed() -> None:
    data = {
        "algorithm": {"adv_estimator": "grpo", "gamma": 0.99},
        "actor_rollout_ref": {"actor": {"loss_agg_mode": "seq-sum", "use_kl_loss": True,
                                         "kl_loss_type": "full"}, "rollout": {"n": 4}},
        "critic": {"optim": {"lr": 1e-5}},
    }  # fmt: skip
    result = import_config("verl", data)
    lines = "\n".join(result.unmapped)
    assert "actor_rollout_ref.actor.loss_agg_mode = 'seq-sum'" in lines
    assert (
        "actor_rollout_ref.actor.kl_loss_type = 'full'  (no hfsdk counterpart for 'full'; "
        "hfsdk KL estimators: abs, k1, k2, k3, k3_clamped, low_var_kl"
    ) in lines
    assert "algorithm.gamma = 0.99  (estimator 'grpo' has no gamma)" in lines
    assert "critic.* (1 key)  (algorithm 'grpo' has no critic)" in lines
    assert "loss_agg_mode" not in result.config["algorithm"]


def _verl_grpo(**rollout: object) -> dict:
    """A small verl GRPO config with ``rollout`` settings."""
    return {
        "algorithm": {"adv_estimator": "grpo"},
        "actor_rollout_ref": {"rollout": {"n": 4, **rollout}},
    }


def test_verl_nested_reward_kwargs_stay_a_mapping() -> None:
    # verl passes custom_reward_function.reward_kwargs to compute_score as they are.
    data = {
        **_verl_grpo(),
        "custom_reward_function": {
            "path": "rm.py",
            "reward_kwargs": {"weights": {"a": 1, "b": 2}, "scale": 0.5},
        },
    }
    (function,) = import_config("verl", data).config["reward"]["functions"]
    assert function["kwargs"] == {"weights": {"a": 1, "b": 2}, "scale": 0.5}


def test_verl_run_names_name_no_wandb_run_without_the_wandb_logger() -> None:
    # They became wandb settings no logger read, which every run of the import warned of.
    trainer = {"logger": ["console"], "project_name": "p", "experiment_name": "e"}
    config = import_config("verl", {**_verl_grpo(), "trainer": trainer}).config
    assert "wandb" not in config and config["trainer"]["loggers"] == ["console", "jsonl"]
    trainer["logger"] = ["console", "wandb"]
    config = import_config("verl", {**_verl_grpo(), "trainer": trainer}).config
    assert config["wandb"] == {"project": "p", "name": "e"}


def test_verl_validation_samples_map_to_val_n_when_sampled() -> None:
    sampled = {"do_sample": True, "n": 8, "temperature": 0.6, "top_p": 0.95}
    result = import_config("verl", _verl_grpo(temperature=0.6, val_kwargs=sampled))
    assert result.config["trainer"]["val_n"] == 8
    lines = "\n".join(result.unmapped)
    assert "val_kwargs.n" not in lines and "val_kwargs.temperature" not in lines
    # hfsdk samples validation with the rollout's settings: another top_p has no counterpart.
    assert "actor_rollout_ref.rollout.val_kwargs.top_p = 0.95  (" in lines
    assert "rollout.top_p" in lines
    # Greedy (verl's default do_sample=false) validates one response: hfsdk's val_n 1.
    result = import_config("verl", _verl_grpo(val_kwargs={"do_sample": False, "n": 4}))
    assert "val_n" not in result.config.get("trainer", {})
    assert not any("val_kwargs" in line for line in result.unmapped)


def test_verl_greedy_rollouts_map_to_temperature_zero() -> None:
    result = import_config("verl", _verl_grpo(do_sample=False, temperature=0.7))
    assert result.config["rollout"]["temperature"] == 0.0
    assert not any("do_sample" in line for line in result.unmapped)
    cfg = resolve_run_config(None, result.config)
    assert cfg.rollout.temperature == 0.0  # hfsdk's greedy decoding
    result = import_config("verl", _verl_grpo(do_sample=True, temperature=0.7))
    assert result.config["rollout"]["temperature"] == 0.7
    assert not any("do_sample" in line for line in result.unmapped)


@pytest.mark.parametrize(
    ("key", "value", "expected", "strategy"),
    [
        ("actor_rollout_ref.rollout.tensor_model_parallel_size", 0, "a positive integer", "fsdp"),
        ("actor_rollout_ref.rollout.tensor_model_parallel_size", 0, "a positive integer",
         "megatron"),
        ("trainer.logger", 5, "a logger name or a list of them", "fsdp"),
        ("data.train_files", 5, "a file path or a list of them", "fsdp"),
        ("data.val_files", [1, None], "a file path or a list of them", "fsdp"),
    ],
)  # fmt: skip
def test_verl_invalid_values_name_the_key(
    key: str, value: object, expected: str, strategy: str
) -> None:
    data = _verl_grpo()
    data["actor_rollout_ref"]["actor"] = {"strategy": strategy}
    node = data
    *parents, leaf = key.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = value
    with pytest.raises(ConfigError) as info:
        import_config("verl", data)
    message = str(info.value)
    assert f"{key}={value!r}" in message and expected in message and "\n" not in message


def test_trl_grpo_config_maps_batches_and_loss() -> None:
    result = import_config("trl", load_source(FIXTURES / "trl_grpo_config.json"))
    cfg = resolve_run_config(None, result.config)
    assert cfg.algo == "grpo" and cfg.algorithm.n_samples_per_prompt == 4
    # 8 completions per device x 2 accumulation steps per optimizer step; 16 completions
    # per generation round are 4 prompts of 4 generations.
    assert cfg.actor.micro_batch_size == 8 and cfg.actor.mini_batch_size == 16
    assert cfg.data.batch_size == 4 and cfg.actor.ppo_epochs == 2
    assert cfg.algorithm.kl_loss_coef == 0.04 and cfg.algorithm.kl_estimator == "k3"
    assert (cfg.policy_loss.clip_ratio_low, cfg.policy_loss.clip_ratio_high) == (0.2, 0.28)
    assert cfg.algorithm.loss_agg_mode == "seq-mean-token-sum-norm"
    assert cfg.advantage.norm_by_std is False
    assert cfg.rollout.max_response_length == 128 and cfg.rollout.temperature == 0.9
    # max_steps=500 TRL optimizer steps, 2 per generation round (2 iterations of one).
    assert cfg.trainer.total_steps == 250
    assert cfg.rollout.backend == "vllm"  # use_vllm
    assert result.unmapped[:2] == (
        "output_dir = 'qwen-grpo'  (no hfsdk counterpart)",
        "logging_steps = 10  (no hfsdk counterpart)",
    )
    assert result.unmapped[2].startswith("lr_scheduler_type = 'linear' (unset: the default)")


def test_trl_ppo_config_is_recognised() -> None:
    data = {"learning_rate": 3e-6, "per_device_train_batch_size": 4, "num_mini_batches": 2,
            "num_ppo_epochs": 2, "cliprange": 0.1, "kl_coef": 0.02, "vf_coef": 0.1,
            "response_length": 32}  # fmt: skip
    result = import_config("trl", data)
    cfg = resolve_run_config(None, result.config)
    assert cfg.algo == "ppo" and cfg.data.batch_size == 8 and cfg.actor.mini_batch_size == 4
    assert cfg.algorithm.kl_in_reward and cfg.algorithm.kl_coef == 0.02
    assert cfg.policy_loss.clip_ratio_low == 0.1 and cfg.critic.ppo_epochs == 2
    assert (
        result.unmapped[0] == "vf_coef = 0.1  (no hfsdk counterpart)" and len(result.unmapped) == 3
    )
    assert result.unmapped[1].startswith("lr_scheduler_type = 'linear' (unset: the default)")
    # No max_steps nor num_train_epochs: TRL's 3 epochs, which hfsdk cannot count.
    assert result.unmapped[2].startswith("num_train_epochs = 3.0 (unset: the default)")


def test_trl_generation_batch_must_hold_whole_groups() -> None:
    with pytest.raises(ConfigError, match="not a multiple of num_generations=3"):
        import_config("trl", {"per_device_train_batch_size": 8, "num_generations": 3})


@pytest.mark.parametrize(
    ("source", "data", "named"),
    [
        ("trl", {"num_generations": 4, "per_device_train_batch_size": 0},
         "per_device_train_batch_size=0 is not valid; TRL expects an integer >= 1"),
        ("trl", {"num_generations": 4, "gradient_accumulation_steps": 0},
         "gradient_accumulation_steps=0 is not valid; TRL expects an integer >= 1"),
        ("trl", {"num_ppo_epochs": 4, "per_device_train_batch_size": 0},
         "per_device_train_batch_size=0 is not valid; TRL expects an integer >= 1"),
        ("trl", {"use_vllm": True, "vllm_tensor_parallel_size": 0},
         "vllm_tensor_parallel_size=0 is not valid; TRL expects an integer >= 1"),
        ("openrlhf", {"vllm_num_engines": 1, "vllm_tensor_parallel_size": 0},
         "vllm_tensor_parallel_size=0 is not valid; OpenRLHF expects an integer >= 1"),
        ("trl", {"tools": 5}, "tools=5 is not a list of tool references"),
        ("trl", {"tools": ["m:f", 5]}, r"tools=\['m:f', 5\] is not a list of tool references"),
    ],
)  # fmt: skip
def test_invalid_counts_and_tools_are_config_errors_naming_the_key(
    source: str, data: dict, named: str
) -> None:
    # These leaked ZeroDivisionError / TypeError from the mapping arithmetic.
    with pytest.raises(ConfigError, match=named):
        import_config(source, data)


def test_cli_writes_the_config_and_lists_unmapped_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_file = tmp_path / "run.yaml"
    code, out, err = _hfsdk(
        capsys, "config", "import", "--from", "verl",
        str(FIXTURES / "verl_grpo_example.yaml"), "data.train_batch_size=32",
        "--out", str(out_file),
    )  # fmt: skip
    assert code == 0, err
    assert out.splitlines()[0] == f"wrote {out_file} (algo grpo)"
    assert out.splitlines()[1:] == []  # every key mapped
    assert yaml.safe_load(out_file.read_text())["data"]["batch_size"] == 32
    assert [p.name for p in tmp_path.iterdir()] == ["run.yaml"]  # no temp file left
    code, _, err = _hfsdk(capsys, "config", "import", "--from", "verl", "a.yaml", "b.yaml")
    assert code == 2 and "give one config FILE" in err
    code, _, err = _hfsdk(
        capsys, "config", "import", "--from", "verl", "actor_rollout_ref.actor.optim.lr=fast"
    )
    assert code == 2 and "is not a number" in err


def _verl_parquet(path: Path) -> None:
    import datasets

    from hfsdk import default_task_assets

    train = Path(default_task_assets().train_files[0])
    rows = [json.loads(x) for x in train.read_text().splitlines()]
    datasets.Dataset.from_list(
        [
            {
                "data_source": "hfsdk/addition",
                "prompt": [{"role": "user", "content": r["prompt"]}],
                "reward_model": {"style": "rule", "ground_truth": r["answer"]},
            }
            for r in rows
        ]
    ).to_parquet(str(path))


MY_REWARD = """
def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    return float(solution_str.split()[:1] == [ground_truth])
"""

# What the examples name that this machine does not have (a hub model, GPUs, wandb,
# hundreds of prompts per step) is replaced; every other imported setting is used.
LOCAL = {
    "verl_ppo_example": [
        "data.train_files=[]", "data.val_files=[]", "actor.model_path=null",
        "critic.model_path=null", "trainer.loggers=[jsonl]", "data.batch_size=4",
        "actor.mini_batch_size=4", "critic.mini_batch_size=4", "rollout.max_response_length=8",
        "data.max_prompt_length=64",  # the tiny model has 128 positions, not 512 + 8
    ],
    "verl_grpo_example": [
        "data.train_files=[train.parquet]", "data.val_files=[]", "actor.model_path=null",
        "placement.pools={global: {devices: 1}}", "data.batch_size=2",
        "actor.mini_batch_size=10", "actor.micro_batch_size=10", "rollout.max_response_length=8",
        "data.max_prompt_length=64",
    ],
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.distributed
def test_imported_verl_examples_run_on_the_default_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from hfsdk.core.config import load_run_config
    from hfsdk.core.trainer.trainer import Trainer
    from hfsdk.core.workers.ray_runtime import shutdown

    monkeypatch.chdir(tmp_path)  # the GRPO example names my_reward.py and train.parquet
    _verl_parquet(tmp_path / "train.parquet")
    (tmp_path / "my_reward.py").write_text(MY_REWARD)
    runs = {}
    # Both runs share one Ray instance (started by the first, reused by the second). It is
    # shut down here: its workers run in tmp_path, where later tests' modules do not import.
    try:
        for example, local in sorted(LOCAL.items()):
            out_file = tmp_path / f"{example}.hfsdk.yaml"
            code, _, err = _hfsdk(
                capsys, "config", "import", "--from", "verl", str(FIXTURES / f"{example}.yaml"),
                "--out", str(out_file),
            )  # fmt: skip
            assert code == 0, err
            # The examples name vLLM; its own tests run it, here the hf engine generates.
            config = yaml.safe_load(out_file.read_text())
            config["rollout"] = {
                k: v for k, v in config["rollout"].items() if k not in ("gpu_memory_utilization",)
            }
            config["rollout"]["backend"] = "hf"
            config["actor"].pop("rollout_layout", None)
            out_file.write_text(yaml.safe_dump(config))
            assert config["trainer"]["val_before_train"] is True  # verl's default
            steps = ["trainer.total_steps=2", "trainer.save_every=0", "trainer.val_every=0"]
            steps.append("trainer.val_before_train=false")
            cfg = load_run_config(None, str(out_file), [*steps, *local])
            trainer = Trainer(cfg, str(tmp_path / example), quiet=True)
            runs[example] = (cfg, trainer.fit())
    finally:
        shutdown()
    ppo, ppo_rows = runs["verl_ppo_example"]
    assert ppo.algo == "ppo" and ppo.critic.optim.lr == 1e-5 and ppo.algorithm.kl_coef == 0.001
    assert len(ppo_rows) == 2 and "critic/vf_loss" in ppo_rows[-1]
    grpo, grpo_rows = runs["verl_grpo_example"]
    assert grpo.algo == "grpo" and grpo.algorithm.n_samples_per_prompt == 5
    assert grpo.algorithm.kl_estimator == "low_var_kl" and grpo.actor.optim.lr == 1e-6
    assert len(grpo_rows) == 2 and "reward/compute_score" in grpo_rows[-1]  # the function name
    for rows in (ppo_rows, grpo_rows):
        assert all(0.0 <= r["reward/mean"] <= 1.0 for r in rows)


@pytest.mark.parametrize("clip", [0.1, "0.2", [0.1, 0.2, 0.3]])
def test_openrlhf_eps_clip_low_high_not_a_pair_is_listed(clip: object) -> None:
    # OpenRLHF takes exactly LOW HIGH; one value (or a JSON string) used to vanish silently.
    result = import_config("openrlhf", {"eps_clip_low_high": clip, "eps_clip": 0.3})
    policy_loss = result.config["policy_loss"]
    assert (policy_loss["clip_ratio_low"], policy_loss["clip_ratio_high"]) == (0.3, 0.3)
    [line] = [u for u in result.unmapped if u.startswith("eps_clip_low_high")]
    assert "OpenRLHF takes two values, LOW HIGH" in line


def test_openrlhf_eps_clip_low_high_pair_maps() -> None:
    result = import_config("openrlhf", {"eps_clip_low_high": [0.1, "0.28"]})
    policy_loss = result.config["policy_loss"]
    assert (policy_loss["clip_ratio_low"], policy_loss["clip_ratio_high"]) == (0.1, 0.28)
    assert not [u for u in result.unmapped if u.startswith("eps_clip")]


def test_verl_k3_is_the_clamped_estimator() -> None:
    # verl's kl_penalty computes k3 exactly as low_var_kl (clamped), not hfsdk's plain k3.
    data = {"actor_rollout_ref": {"actor": {"use_kl_loss": True, "kl_loss_type": "k3"}}}
    assert import_config("verl", data).config["algorithm"]["kl_estimator"] == "low_var_kl"
    in_reward = {"algorithm": {"use_kl_in_reward": True, "kl_penalty": "k3"},
                 "actor_rollout_ref": {"actor": {"use_kl_loss": True,
                                                 "kl_loss_type": "low_var_kl"}}}  # fmt: skip
    result = import_config("verl", in_reward)
    assert result.config["algorithm"]["kl_estimator"] == "low_var_kl"
    # The same estimator in verl, so not reported as a reward/loss mismatch.
    assert not [u for u in result.unmapped if "kl_loss_type" in u]


def test_verl_kl_in_the_reward_and_as_a_loss_lists_the_loss_as_unmapped() -> None:
    """verl adds both terms; hfsdk's KL goes in one place. The import wrote the loss's
    coefficient, which the run then dropped silently, and reported a complete mapping."""
    data = {"algorithm": {"use_kl_in_reward": True},
            "actor_rollout_ref": {"actor": {"use_kl_loss": True, "kl_loss_coef": 0.05}}}  # fmt: skip
    result = import_config("verl", data)
    assert result.config["algorithm"]["kl_loss_coef"] == 0.0
    assert result.config["algorithm"]["kl_in_reward"] is True
    (line,) = [u for u in result.unmapped if "use_kl_loss" in u]
    assert "in the reward or in the loss, not both" in line


SMALL_GRPO = {"per_device_train_batch_size": 2, "num_generations": 2}


def test_trl_prompt_limit_is_imported_with_a_truncation_warning() -> None:
    # TRL truncates prompts over the limit, hfsdk drops them: the import must say so.
    result = import_config("trl", {**SMALL_GRPO, "max_prompt_length": 16})
    assert result.config["data"]["max_prompt_length"] == 16
    assert any(
        w.startswith("TRL truncates prompts over max_prompt_length=16") for w in result.warnings
    )
    assert "hfsdk data inspect" in result.to_yaml()


def test_trl_prompt_limit_left_out_is_listed_not_invented() -> None:
    # Current GRPOConfig has no prompt limit: an invented 512 would drop prompts TRL keeps.
    result = import_config("trl", SMALL_GRPO)
    assert "max_prompt_length" not in result.config.get("data", {})
    assert not any(a.startswith("max_prompt_length") for a in result.assumed)
    assert any(
        u.startswith("max_prompt_length = None (unset: the default)") for u in result.unmapped
    )


def test_trl_local_dataset_name_becomes_the_training_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Review: a local dataset_name was listed as not mapped and the imported run trained on
    # the default task. TRL's script reads load_dataset(dataset_name)[dataset_train_split]:
    # a file is its 'train' split; a saved DatasetDict's split is DIR/<split> for hfsdk.
    import datasets

    monkeypatch.chdir(tmp_path)
    rows = datasets.Dataset.from_list([{"prompt": "2 + 3 =", "answer": "5"}])
    (tmp_path / "d.jsonl").write_text('{"prompt": "2 + 3 =", "answer": "5"}\n')
    rows.save_to_disk(str(tmp_path / "one"))
    datasets.DatasetDict({"train": rows, "test": rows}).save_to_disk(str(tmp_path / "two"))
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "train.jsonl").write_text("{}\n")

    def imported(**keys: object) -> tuple[object, tuple[str, ...]]:
        result = import_config("trl", {**SMALL_GRPO, **keys})
        return result.config.get("data", {}).get("train_files"), result.unmapped

    def listed(unmapped: tuple[str, ...], key: str) -> list[str]:
        return [line for line in unmapped if line.startswith(f"{key} = ")]

    files, unmapped = imported(dataset_name=str(tmp_path / "d.jsonl"))
    assert files == [str(tmp_path / "d.jsonl")] and not listed(unmapped, "dataset_name")
    # relative to where TRL (and the import) runs: recorded absolute
    files, unmapped = imported(dataset_name="d.jsonl", dataset_train_split="train")
    assert files == [str(tmp_path / "d.jsonl")]
    assert not listed(unmapped, "dataset_name") and not listed(unmapped, "dataset_train_split")
    files, _ = imported(dataset_name="one")
    assert files == [str(tmp_path / "one")]
    files, _ = imported(dataset_name="two")  # TRL's dataset_train_split default: train
    assert files == [str(tmp_path / "two" / "train")]
    files, unmapped = imported(dataset_name="two", dataset_train_split="test")
    assert files == [str(tmp_path / "two" / "test")] and not listed(unmapped, "dataset_train_split")
    # what hfsdk cannot load offline stays listed, with why
    files, unmapped = imported(dataset_name="two", dataset_train_split="dev")
    assert files is None
    assert listed(unmapped, "dataset_name") == [
        "dataset_name = 'two'  (the saved DatasetDict has no split 'dev' (splits: train, test); "
        "set data.train_files to DIR/<split>)"
    ]
    files, unmapped = imported(dataset_name="plain")
    assert (
        files is None and "a Dataset.save_to_disk directory" in listed(unmapped, "dataset_name")[0]
    )
    # a hub name: listed as before, with the existing reason
    files, unmapped = imported(dataset_name="trl-lib/tldr", dataset_train_split="train")
    assert files is None
    assert listed(unmapped, "dataset_name") == [
        "dataset_name = 'trl-lib/tldr'  (no hfsdk counterpart)"
    ]
    assert listed(unmapped, "dataset_train_split") == [
        "dataset_train_split = 'train'  (no hfsdk counterpart)"
    ]


@pytest.mark.parametrize("flags", [{}, {"prompt_max_len": 16}])
def test_openrlhf_prompt_limit_is_imported_with_a_truncation_warning(flags: dict) -> None:
    result = import_config("openrlhf", {"advantage_estimator": "reinforce", **flags})
    length = flags.get("prompt_max_len", 1024)  # OpenRLHF's default when left out
    assert result.config["data"]["max_prompt_length"] == length
    assert any(
        w.startswith(f"OpenRLHF truncates prompts over --prompt_max_len={length} tokens")
        for w in result.warnings
    )


def test_trl_vllm_importance_sampling_default_is_assumed() -> None:
    # With use_vllm TRL corrects by default: sequence-level masked IS, cap 3.
    data = {**SMALL_GRPO, "use_vllm": True, "vllm_mode": "colocate"}
    result = import_config("trl", data)
    cfg = resolve_run_config(None, result.config)
    assert [dict(e) for e in cfg.rollout_correction.apply] == [
        {"name": "mis", "level": "sequence", "cap": 3.0}
    ]
    assert "vllm_importance_sampling_correction=True" in result.assumed
    given = {"vllm_importance_sampling_mode": "token_truncate", "vllm_importance_sampling_cap": 2}
    result = import_config("trl", {**data, **given})
    assert result.config["rollout_correction"]["apply"] == [
        {"name": "tis", "level": "token", "cap": 2.0}
    ]
    result = import_config("trl", {**data, "vllm_importance_sampling_correction": False})
    assert "rollout_correction" not in result.config
    assert not any(u.startswith("vllm_importance") for u in result.unmapped)


def test_trl_bf16_and_gradient_checkpointing_defaults_are_assumed() -> None:
    # TRL's configs default both on; hfsdk's actor has both off.
    result = import_config("trl", SMALL_GRPO)
    assert result.config["actor"]["dtype"] == "bfloat16"
    assert result.config["actor"]["gradient_checkpointing"] is True
    assert {"bf16=True", "gradient_checkpointing=True"} <= set(result.assumed)
    result = import_config("trl", {**SMALL_GRPO, "fp16": True, "gradient_checkpointing": False})
    assert "dtype" not in result.config["actor"]
    assert result.config["actor"]["gradient_checkpointing"] is False
    assert result.unmapped[0] == "fp16 = True  (no hfsdk counterpart)"


def test_verl_warmup_style_wins_over_lr_scheduler_type() -> None:
    # verl's OptimizerConfig takes the deprecated warmup_style over lr_scheduler_type when set.
    optim = {"lr_scheduler_type": "constant", "warmup_style": "cosine"}
    data = {"algorithm": {"adv_estimator": "grpo"},
            "actor_rollout_ref": {"actor": {"optim": optim}, "rollout": {"n": 4}}}  # fmt: skip
    result = import_config("verl", data)
    assert result.config["actor"]["optim"]["lr_schedule"] == "cosine"
    assert not any("lr_scheduler_type" in line for line in result.unmapped)


def test_trl_vllm_correction_is_left_out_under_truncated_sampling() -> None:
    # vLLM reports renormalised log-probs under top_p < 1 at temperature != 1: no correction.
    data = {**SMALL_GRPO, "use_vllm": True, "temperature": 0.7, "top_p": 0.95}
    result = import_config("trl", data)
    assert "rollout_correction" not in result.config
    (line,) = [u for u in result.unmapped if u.startswith("vllm_importance_sampling_correction")]
    assert "full-vocabulary behaviour log-probs" in line
    result = import_config("trl", {**data, "vllm_importance_sampling_correction": True})
    assert any(u.startswith("vllm_importance_sampling_correction = True") for u in result.unmapped)


@pytest.mark.parametrize("algo", [None, "dpo"])
def test_trl_dpo_config_is_refused_naming_the_keys(algo: str | None) -> None:
    data = {"model_name_or_path": "m", "beta": 0.1, "loss_type": "sigmoid", "max_length": 1024}
    with pytest.raises(ConfigError, match="a DPOConfig is not imported") as info:
        import_config("trl", data, algo=algo)
    assert "loss_type='sigmoid'" in str(info.value) and "docs/algorithms.md" in str(info.value)
