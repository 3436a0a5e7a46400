"""``hfsdk config import`` round two: interpolations, defaults lists, launch scripts, command lines."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from hfsdk import HfsdkError
from hfsdk.core.config import resolve_run_config
from hfsdk_migration.importing import (
    import_config,
    read_source,
    verl_compose,
    without_source_paths,
)
from hfsdk_migration.importing.shell import split_script
from hfsdk_migration.importing.verl_compose import compose, resolve

FIXTURES = Path(__file__).parent / "fixtures"
ENV = {"HOME": "/home/u"}


def _import(source: str, name: str, *args: str):
    data, warnings = read_source(source, str(FIXTURES / name), list(args), env=ENV)
    result = import_config(source, data, warnings=warnings)
    # The megatron backend checks model directories when its config is built; they are the
    # source machine's, so the config is resolved here without them (as the importer checks it).
    return result, resolve_run_config(None, without_source_paths(result.config))


def test_omegaconf_interpolations_resolve_as_omegaconf_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HOME", "/home/u")
    monkeypatch.delenv("PORT", raising=False)
    tree = {
        "a": {"n": 4, "same": "${a.n}", "sibling": "${.n}", "up": "${..top}", "text": "x_${a.n}"},
        "top": "t",
        "sel": "${oc.select:a.absent,256}",
        "sel_rel": "${oc.select:.top,null}",
        "sel_list": "${oc.select:a.absent,[]}",
        "sel_quoted": '${oc.select:a.absent,"~/m"}',
        "env": "${oc.env:PORT,8080}",
        "env_set": "${oc.env:HOME}",
        "env_null": "${oc.env:NOPE,null}",
        "nested": "${oc.select:a.absent,${a.n}}",
        "missing": "???",
        "bad": "${no.such.key}",
        "escaped": "\\${a.n}",
    }
    resolved, problems = resolve(tree)
    assert resolved["a"]["same"] == 4 and resolved["a"]["sibling"] == 4
    assert resolved["a"]["up"] == "t" and resolved["a"]["text"] == "x_4"
    assert resolved["sel"] == 256 and resolved["sel_rel"] == "t" and resolved["sel_list"] == []
    assert resolved["sel_quoted"] == "~/m" and resolved["nested"] == 4
    assert resolved["env"] == "8080" and resolved["env_set"] == "/home/u"
    assert resolved["env_null"] is None and resolved["missing"] is None
    assert resolved["bad"] == "${no.such.key}" and resolved["escaped"] == "${a.n}"
    assert problems[0] == "missing is ??? (verl requires it; it was not given)"
    assert problems[1].startswith("bad = '${no.such.key}' left as written: ")
    assert len(problems) == 2


@pytest.mark.parametrize("name", ["ppo_trainer", "ppo_megatron_trainer"])
def test_verls_generated_configs_import_and_validate(name: str) -> None:
    result, cfg = _import("verl", f"verl_generated_{name}.yaml")
    assert cfg.algo == "ppo" and cfg.algorithm.advantage_estimator == "gae"
    # ${oc.select:actor_rollout_ref.actor.ppo_mini_batch_size,256} resolved for the critic.
    assert cfg.actor.mini_batch_size == cfg.critic.mini_batch_size == 256
    assert cfg.actor.optim.lr == 1e-6 and cfg.critic.optim.lr == 1e-5
    assert cfg.actor.optim.weight_decay == 0.01 and cfg.value_loss.clip_range_value == 0.5
    assert cfg.data.batch_size == 1024 and cfg.rollout.max_response_length == 512
    megatron = name == "ppo_megatron_trainer"
    assert result.config["actor"].get("backend", "fsdp") == ("megatron" if megatron else "fsdp")
    assert "actor_rollout_ref.rollout.name is ??? (verl requires it; it was not given)" in (
        result.warnings
    )
    lines = result.unmapped
    assert len(lines) == len(set(lines))
    assert all("  (" in line for line in lines), [x for x in lines if "  (" not in x]
    joined = "\n".join(lines)
    assert "global_profiler.* (16 keys)  (no counterpart (profiling))" in joined
    assert "${" not in joined  # every interpolation resolved
    if megatron:
        assert (
            "actor_rollout_ref.actor.megatron.sequence_parallel = True  (hfsdk's megatron" in joined
        )
    else:
        assert cfg.actor.gradient_checkpointing and cfg.actor.remove_padding


def test_a_defaults_list_is_composed_from_a_config_dir_or_verls_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import yaml

    monkeypatch.setattr(verl_compose, "installed_config_dir", lambda: None)
    (tmp_path / "actor").mkdir()
    (tmp_path / "optim").mkdir()
    (tmp_path / "actor" / "base.yaml").write_text("ppo_mini_batch_size: 8\nppo_epochs: 1\n")
    (tmp_path / "actor" / "dp_actor.yaml").write_text(
        "defaults:\n  - ../optim@optim: fsdp\n  - base\n  - _self_\nstrategy: fsdp\nppo_epochs: 2\n"
    )
    (tmp_path / "optim" / "fsdp.yaml").write_text("lr: 3.0e-06\n")
    user = {
        "defaults": [{"actor@actor_rollout_ref.actor": "dp_actor"}, "_self_"],
        "algorithm": {"adv_estimator": "grpo"},
        "actor_rollout_ref": {"actor": {"ppo_epochs": 3}, "rollout": {"n": 2}},
    }
    composed = compose([tmp_path], "ppo_trainer", [], primary=user)
    assert composed["actor_rollout_ref"]["actor"] == {
        "optim": {"lr": 3e-6}, "ppo_mini_batch_size": 8, "ppo_epochs": 3, "strategy": "fsdp",
    }  # fmt: skip
    cfg = resolve_run_config(None, import_config("verl", composed).config)
    assert cfg.actor.optim.lr == 3e-6 and cfg.actor.mini_batch_size == 16
    # Without a directory: verl's defaults for the mapped keys (ppo_mini_batch_size=256).
    user_file = tmp_path / "mine.yaml"
    user_file.write_text(yaml.safe_dump(user))
    data, warnings = read_source("verl", str(user_file), [], env=ENV)
    assert "hfsdk's copy of verl's ppo_trainer defaults" in warnings[0]
    cfg = resolve_run_config(None, import_config("verl", data).config)
    assert cfg.actor.mini_batch_size == 512 and cfg.actor.ppo_epochs == 3


def test_the_shell_reads_a_launch_script_as_bash_would() -> None:
    script = split_script(
        "set -x\nA=2\nB=$((A * 3))\nC=${UNSET:-\"${HOME}/x\"}\nL=\"['$C', 'y']\"\n"
        "python3 -m verl.trainer.main_ppo \\\n  a.b=$B \\\n  'c.d=it''s' \\\n"
        '  e.f="$L" \\\n  g=$NOPE $@ 2>&1 | tee log\n',
        ENV,
    )
    assert script.commands[-2] == [
        "python3", "-m", "verl.trainer.main_ppo", "a.b=6", "c.d=its",
        "e.f=['/home/u/x', 'y']", "g=$NOPE",
    ]  # fmt: skip
    assert script.warnings == [
        "$HOME taken from this environment: '/home/u'",
        "$NOPE is not set here; left as written",
        "$@ (the script's own arguments) taken as empty",
    ]


def test_alternate_values_expand_to_the_word_as_bash_does() -> None:
    # ${V+word}: word when V is set (even empty); ${V:+word}: when set and not empty; else "".
    script = split_script(
        "FULL=1\nEMPTY=\ncmd a=${FULL:+32} b=${FULL+x} c=${EMPTY:+y} d=${EMPTY+z} "
        'e=${UNSET:+u} f=${UNSET+v} g="${FULL:+$FULL-on}" h=${HOME:+home}\n',
        ENV,
    )
    assert script.commands[-1] == [
        "cmd", "a=32", "b=x", "c=", "d=z", "e=", "f=", "g=1-on", "h=home",
    ]  # fmt: skip
    assert script.warnings == ["$HOME taken from this environment: '/home/u'"]


def test_arrays_expand_to_their_elements_as_separate_words() -> None:
    # How verl's newer example scripts pass their overrides (bash arrays).
    script = split_script(
        "a=1024\nb=2048\nALGO=(\n  algo.x=grpo   # a comment\n  'optim.lr=3e-6'\n)\n"
        "ALGO+=( rollout.n=8 )\nMODEL=( model.path=Qwen )\n"
        'python3 -m verl.trainer.main_ppo "${ALGO[@]}" ${MODEL[@]} len=$(( ${a} + ${b} )) '
        '"${NONE[@]}" first=${ALGO[0]}\n',
        ENV,
    )
    assert script.commands[-1] == [
        "python3", "-m", "verl.trainer.main_ppo", "algo.x=grpo", "optim.lr=3e-6", "rollout.n=8",
        "model.path=Qwen", "len=3072", "first=algo.x=grpo",
    ]  # fmt: skip
    assert script.warnings == ["${NONE[@]} is not set here; taken as empty"]


def test_fsdp_vllm_grpo_script_maps_engine_tp_and_kl() -> None:
    result, cfg = _import("verl", "verl_run_grpo_fsdp_vllm.sh")
    assert cfg.algo == "grpo" and cfg.rollout.backend == "vllm"
    assert cfg.rollout.gpu_memory_utilization == 0.6
    assert "rollout_layout" not in result.config["actor"]  # vLLM on FSDP generates at tp 1
    assert cfg.algorithm.n_samples_per_prompt == 5 and cfg.actor.mini_batch_size == 80
    assert cfg.algorithm.kl_estimator == "low_var_kl" and cfg.algorithm.kl_loss_coef == 0.001
    assert cfg.actor.gradient_checkpointing and cfg.actor.micro_batch_size == 8
    assert cfg.data.train_files == ("/home/u/data/gsm8k/train.parquet",)
    assert cfg.trainer.loggers == ("console", "wandb", "jsonl")
    assert "$HOME taken from this environment: '/home/u'" in result.warnings
    assert cfg.wandb.project == "fixture_grpo"
    assert cfg.wandb.name == "qwen_fsdp_vllm"
    assert result.unmapped == (
        "actor_rollout_ref.ref.fsdp_config.param_offload = True  (no counterpart: hfsdk keeps "
        "each role's weights, gradients and optimizer state on its devices (rollout.sleep frees "
        "vLLM's memory while the actor trains))",
        "actor_rollout_ref.rollout.tensor_model_parallel_size = 2  (hfsdk's vLLM rollout on an "
        "FSDP actor generates at tp 1 (set actor.rollout_layout.tp with rollout.backend: hf, or "
        "a megatron actor))",
        "trainer.total_epochs = 15  (hfsdk counts steps: set trainer.total_steps = total_epochs "
        "x rows // data.train_batch_size (the train files are not here to count))",
        "critic.* (15 keys)  (algorithm 'grpo' has no critic)",
    )


def test_total_epochs_become_steps_when_the_train_files_are_here(tmp_path: Path) -> None:
    rows = tmp_path / "train.jsonl"
    rows.write_text("".join('{"prompt": "p"}\n' for _ in range(100)))
    result, cfg = _import(
        "verl", "verl_run_grpo_fsdp_vllm.sh", f"data.train_files={rows}", "data.train_batch_size=16"
    )
    assert cfg.trainer.total_steps == 15 * (100 // 16)
    assert not any("total_epochs" in line for line in result.unmapped)


def test_megatron_script_maps_tp_pp_and_explains_the_rollout_tp() -> None:
    result, cfg = _import("verl", "verl_run_grpo_megatron.sh")
    assert result.config["actor"]["backend"] == "megatron"
    assert result.config["reference"]["backend"] == "megatron"
    assert result.config["actor"]["parallel"] == {"tp": 4, "pp": 2}
    assert result.config["reference"]["parallel"] == {"tp": 4, "pp": 2}
    assert cfg.trainer.total_steps == 100 and cfg.algorithm.n_samples_per_prompt == 4
    assert cfg.data.train_files == (
        "/home/u/data/gsm8k/train.parquet", "/home/u/data/math/train.parquet",
    )  # fmt: skip
    joined = "\n".join(result.unmapped)
    assert "rollout.tensor_model_parallel_size = 2  (hfsdk's vLLM rollout on a megatron actor" in (
        joined
    )
    # With the hf rollout the other generation tp is the actor's rollout layout.
    result, _ = _import("verl", "verl_run_grpo_megatron.sh", "actor_rollout_ref.rollout.name=hf")
    assert result.config["actor"]["rollout_layout"] == {"tp": 2}


def test_dapo_script_becomes_dapo_and_lists_offload_and_maps_token_budgets() -> None:
    result, cfg = _import("verl", "verl_run_dapo.sh")
    # filter_groups inside a KL-free GRPO run is the dapo algorithm's dynamic sampling.
    assert cfg.algo == "dapo" and cfg.algorithm.dynamic_sampling
    assert cfg.algorithm.max_generation_rounds == 10
    assert cfg.actor.micro_batch_tokens == (2048 + 4096) * 2
    assert cfg.data.max_prompt_length == 2048 and cfg.rollout.max_response_length == 4096
    assert cfg.policy_loss.clip_ratio_high == 0.28 and cfg.actor.mini_batch_size == 64
    assert result.config["actor"]["model_path"] == "/home/u/models/Qwen2.5-Math-7B"
    joined = "\n".join(result.unmapped)
    assert "filter_groups" not in joined
    assert "actor_rollout_ref.actor.fsdp_config.optimizer_offload = True  (no counterpart" in (
        joined
    )


def test_trl_command_line_imports(capsys: pytest.CaptureFixture[str]) -> None:
    result, cfg = _import("trl", "trl_grpo_command.sh")
    assert cfg.algo == "grpo" and cfg.actor.optim.lr == 1e-6
    assert cfg.algorithm.n_samples_per_prompt == 8 and cfg.actor.mini_batch_size == 32
    assert cfg.data.batch_size == 4 and cfg.algorithm.kl_loss_coef == 0.04
    assert cfg.rollout.backend == "vllm" and cfg.actor.gradient_checkpointing
    assert cfg.trainer.total_steps == 100
    assert result.config["actor"]["model_path"] == "Qwen/Qwen2.5-0.5B-Instruct"
    # TRL's default linear decay and its unlimited prompts have no counterpart: listed though
    # unset.
    assert (
        result.unmapped[0] == "output_dir = 'qwen-grpo'  (no hfsdk counterpart)"
        and len(result.unmapped) == 3
    )
    assert result.unmapped[1].startswith("lr_scheduler_type = 'linear' (unset: the default)")
    assert result.unmapped[2].startswith("max_prompt_length = None (unset: the default)")
    data, _ = read_source("trl", None, ["--learning_rate", "2e-6", "--num_generations=4"])
    assert data == {"learning_rate": 2e-6, "num_generations": 4}


def test_store_true_flags_given_bare_still_import_and_empty_values_are_kept() -> None:
    # Only numeric keys refuse a bare flag (test_config_import_command's cases); a bare
    # store-true flag is True, as argparse makes it.
    data, _ = read_source("trl", None, ["--use_peft", "--bf16", "--learning_rate", "2e-6"])
    cfg = resolve_run_config(None, import_config("trl", {**data, "max_steps": 10}).config)
    assert cfg.actor.lora.rank == 16 and cfg.actor.dtype == "bfloat16"
    assert cfg.actor.optim.lr == 2e-6
    words = ["--bf16", "--gradient_checkpointing", "--actor_learning_rate", "1e-6"]
    data, _ = read_source("openrlhf", None, words)
    cfg = resolve_run_config(None, import_config("openrlhf", data).config)
    assert cfg.actor.dtype == "bfloat16" and cfg.actor.gradient_checkpointing
    assert cfg.actor.optim.lr == 1e-6
    # An empty value stays empty, as argparse keeps it, not null (unset: the default).
    data, _ = read_source("trl", None, ["seed=", "--learning_rate=", "--num_generations", ""])
    assert data == {"learning_rate": "", "num_generations": "", "seed": ""}


def test_a_verl_file_without_defaults_is_the_whole_config_and_the_advice_composes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(verl_compose, "installed_config_dir", lambda: None)
    whole = tmp_path / "v.yaml"
    whole.write_text("data: {train_batch_size: 32}\n")
    override = "actor_rollout_ref.actor.optim.lr=1e-5"
    with pytest.raises(HfsdkError, match=r"'\S*v\.yaml' has no defaults list, so it is the whole"):
        read_source("verl", str(whole), [override], env=ENV)
    # Both ways the message offers: `+` adds the key to the file, a defaults list composes
    # the file on verl's ppo_trainer (as Hydra does for verl with the same file).
    for path, given in ((whole, f"+{override}"), (tmp_path / "v2.yaml", override)):
        path.write_text("defaults: [ppo_trainer, _self_]\n" * (path != whole) + whole.read_text())
        data, _ = read_source("verl", str(path), [given], env=ENV)
        assert data["actor_rollout_ref"]["actor"]["optim"]["lr"] == 1e-5
        assert data["data"]["train_batch_size"] == 32


def test_openrlhf_command_line_imports() -> None:
    result, cfg = _import("openrlhf", "openrlhf_train_ppo_ray.sh")
    assert cfg.algo == "ppo" and cfg.actor.optim.lr == 5e-7 and cfg.critic.optim.lr == 9e-6
    assert cfg.actor.micro_batch_size == 8 and cfg.actor.mini_batch_size == 128
    assert cfg.actor.forward_micro_batch_size == 16 and cfg.data.batch_size == 64
    assert cfg.algorithm.kl_in_reward and cfg.algorithm.kl_coef == 0.01
    assert cfg.rollout.backend == "vllm" and cfg.rollout.max_response_length == 1024
    assert cfg.data.prompt_key == "context_messages" and cfg.data.apply_chat_template
    function = cfg.reward.functions[0]
    assert (function.name, function.style) == ("reward_func.py:reward_func", "openrlhf")
    assert cfg.placement.pools["global"].devices == 2
    joined = "\n".join(result.unmapped)
    assert "zero_stage = 3  (hfsdk decides this itself: FSDP2 shards" in joined
    assert "ref_num_gpus_per_node = 2  (hfsdk decides this itself" in joined


def test_launchers_processes_nodes_and_no_vllm_are_counted(tmp_path: Path) -> None:
    # TRL's batches are per process: accelerate's 8 processes make 8 x 4 responses a step.
    trl = tmp_path / "trl.sh"
    trl.write_text(
        "accelerate launch --num_processes=8 train_grpo.py --per_device_train_batch_size 4 "
        "--num_generations 16\n"
    )
    data, _ = read_source("trl", str(trl), [], env=ENV)
    cfg = resolve_run_config(None, import_config("trl", data).config)
    assert cfg.data.batch_size == 2 and cfg.actor.mini_batch_size == 32
    assert cfg.placement.pools["global"].devices == 8
    with pytest.raises(HfsdkError, match=r"num_generations=0; GRPO needs at least 1"):
        import_config("trl", {"num_generations": 0})
    # OpenRLHF's GPUs are per node; hfsdk's pools count them all. 0 engines: no vLLM.
    orl = tmp_path / "orl.sh"
    orl.write_text(
        "python -m openrlhf.cli.train_ppo_ray --actor_num_nodes 2 --actor_num_gpus_per_node 8 "
        "--vllm_num_engines 0\n"
    )
    data, _ = read_source("openrlhf", str(orl), [], env=ENV)
    cfg = resolve_run_config(None, import_config("openrlhf", data).config)
    pool = cfg.placement.pools["global"]
    assert (pool.devices, pool.nodes) == (16, 2) and cfg.rollout.backend != "vllm"
    assert tuple(cfg.actor.optim.betas) == (0.9, 0.95)  # train_ppo_ray's default, not hfsdk's


def test_a_generation_tp_the_actors_devices_cannot_hold_is_listed_not_written() -> None:
    # TRL refuses tp 2 on one process too; written, the file would fail `config show`.
    one = import_config(
        "trl",
        {"use_vllm": True, "vllm_tensor_parallel_size": 2, "lr_scheduler_type": "cosine",
         "max_prompt_length": 512, "max_steps": 10},
    )  # fmt: skip
    assert "rollout_layout" not in one.config["actor"]
    assert one.unmapped == (
        "vllm_tensor_parallel_size = 2  (2 does not divide the actor's 1 device(s), where hfsdk "
        "generates; set actor.rollout_layout.tp to a divisor of placement.pools.global.devices)",
    )
    resolve_run_config(None, one.config)
    two = import_config(
        "trl", {"use_vllm": True, "vllm_tensor_parallel_size": 2, "num_processes": 2}
    )
    # It divides the devices, but vLLM on an FSDP actor generates at tp 1.
    assert "rollout_layout" not in two.config["actor"]
    assert "vLLM rollout on an FSDP actor generates at tp 1" in two.unmapped[0]
    resolve_run_config(None, two.config)


def _hfsdk(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    from hfsdk.core.cli.main import main

    with pytest.raises(SystemExit) as info:
        main(list(args))
    out, err = capsys.readouterr()
    return int(info.value.code or 0), out, err


def test_cli_imports_command_lines_and_config_dirs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import yaml

    monkeypatch.setenv("HOME", "/home/u")
    # TRL flags straight on the command line, after the source.
    code, out, err = _hfsdk(
        capsys, "config", "import", "--from", "trl", "--learning_rate", "2e-6",
        "--num_generations", "4", "--per_device_train_batch_size", "8", "--bf16",
    )  # fmt: skip
    assert code == 0, err
    config = yaml.safe_load(out)
    assert config["actor"]["optim"]["lr"] == 2e-6 and config["actor"]["dtype"] == "bfloat16"
    assert config["algorithm"]["n_samples_per_prompt"] == 4 and config["data"]["batch_size"] == 2
    # An OpenRLHF script written to a file.
    out_file = tmp_path / "run.yaml"
    code, out, err = _hfsdk(
        capsys, "config", "import", "--from", "openrlhf",
        str(FIXTURES / "openrlhf_train_ppo_ray.sh"), "--out", str(out_file),
    )  # fmt: skip
    assert code == 0, err
    assert out.splitlines()[0] == f"wrote {out_file} (algo ppo)"
    assert "  zero_stage = 3  (hfsdk decides this itself: FSDP2 shards" in out
    # A script's --config-name found in a directory of the user's configs (searched first),
    # composed on a verl-like tree (searched next).
    mine, verl = tmp_path / "mine", tmp_path / "verl"
    (verl / "actor").mkdir(parents=True)
    mine.mkdir()
    (verl / "ppo_trainer.yaml").write_text(
        "defaults:\n  - actor@actor_rollout_ref.actor: dp_actor\n  - _self_\n"
        "algorithm: {adv_estimator: gae}\n"
        "actor_rollout_ref: {rollout: {n: 1}}\ndata: {train_files: null}\n"
    )
    (verl / "actor" / "dp_actor.yaml").write_text("ppo_mini_batch_size: 64\nstrategy: fsdp\n")
    (mine / "my_grpo.yaml").write_text(
        "hydra: {searchpath: [file://verl/trainer/config]}\n"
        "defaults:\n  - ppo_trainer\n  - _self_\nalgorithm: {adv_estimator: grpo}\n"
    )
    script = tmp_path / "run.sh"
    script.write_text(
        "python3 -m verl.trainer.main_ppo --config-name=my_grpo \\\n"
        "    actor_rollout_ref.rollout.n=4 data.train_files=$HOME/d.parquet\n"
    )
    code, out, err = _hfsdk(
        capsys, "config", "import", "--from", "verl", str(script),
        "--verl-config-dir", str(mine), "--verl-config-dir", str(verl),
    )  # fmt: skip
    assert code == 0, err
    config = yaml.safe_load(out)
    assert config["algo"] == "grpo" and config["actor"]["mini_batch_size"] == 256
    assert config["data"]["train_files"] == ["/home/u/d.parquet"]
    assert "warning: $HOME taken from this environment: '/home/u'" in err
    code, _, err = _hfsdk(
        capsys, "config", "import", "--from", "verl", str(script), "--verl-config-dir", str(verl)
    )
    assert code == 2 and "verl config 'my_grpo.yaml' is not in" in err
    # Overrides alone on top of --config-name (hfsdk's copy of verl's megatron defaults).
    code, out, err = _hfsdk(
        capsys, "config", "import", "--from", "verl", "--config-name", "ppo_megatron_trainer",
        "algorithm.adv_estimator=grpo", "actor_rollout_ref.rollout.n=4", "~trainer.logger",
    )  # fmt: skip
    assert code == 0, err
    config = yaml.safe_load(out)
    assert config["actor"]["backend"] == config["reference"]["backend"] == "megatron"
    assert "loggers" not in config["trainer"]
    # TRL: a file's keys overridden with key=value words, as before.
    code, out, err = _hfsdk(
        capsys, "config", "import", "--from", "trl", str(FIXTURES / "trl_grpo_config.json"),
        "num_generations=2",
    )  # fmt: skip
    assert code == 0, err
    assert yaml.safe_load(out)["algorithm"]["n_samples_per_prompt"] == 2


OPENRLHF_REWARD = """
def reward_func(queries, prompts, labels):
    return [float(q[len(p):].split()[:1] == [str(label)]) for q, p, label in zip(queries, prompts, labels)]
"""

# What the sources name that this machine does not have is replaced: the model and data
# (the default task's), the device count and batch sizes (one CPU device, a few prompts), the
# vLLM engine (hf: the vLLM path has its own tests) and bf16 (emulated, slow on CPU). Every other
# imported setting is used as imported.
LOCAL = [
    "data.train_files=[]", "data.val_files=[]", "actor.model_path=null",
    "trainer.loggers=[jsonl]", "trainer.total_steps=2", "trainer.save_every=0",
    "trainer.val_every=0", "trainer.val_before_train=false",
    "rollout.backend=hf", "rollout.max_response_length=8",
    "placement.pools={global: {devices: 1}}", "data.batch_size=2", "actor.dtype=float32",
    "data.max_prompt_length=64",  # the tiny model has 128 positions
]  # fmt: skip
VLLM_ONLY = ("dtype", "gpu_memory_utilization", "max_num_seqs", "sleep", "enforce_eager")
SMALL = ["actor.mini_batch_size=4", "actor.micro_batch_size=4", "algorithm.n_samples_per_prompt=2"]
RUNS = {
    "verl_run_grpo_fsdp_vllm.sh": ("verl", [*SMALL, "actor.rollout_layout.tp=1"]),
    "verl_run_dapo.sh": ("verl", [*SMALL, "actor.rollout_layout.tp=1"]),
    "verl_run_grpo_megatron.sh": (
        "verl",
        [*SMALL, "actor.parallel={tp: 1, pp: 1}", "reference.parallel={tp: 1, pp: 1}",
         "actor.rollout_layout.tp=1"],
    ),
    "verl_generated_ppo_trainer.yaml": (
        "verl",
        [*SMALL, "critic.model_path=null", "critic.mini_batch_size=4", "critic.micro_batch_size=4",
         "critic.dtype=float32", "actor.rollout_layout.tp=1", "reference.dtype=float32"],
    ),
    "trl_grpo_command.sh": ("trl", SMALL),
    "openrlhf_train_ppo_ray.sh": (
        "openrlhf",
        [*SMALL, "critic.model_path=null", "critic.mini_batch_size=4", "critic.micro_batch_size=4",
         "critic.dtype=float32", "data.prompt_key=prompt", "data.apply_chat_template=null",
         "reward.functions=[{name: reward_func.py:reward_func, kwargs: {label_key: answer}}]"],
    ),
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.distributed
@pytest.mark.heavy
def test_every_imported_config_runs_two_steps_on_the_default_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import yaml

    from hfsdk import default_task_assets
    from hfsdk.core.config import load_run_config
    from hfsdk.core.trainer.trainer import Trainer
    from hfsdk.core.workers.ray_runtime import shutdown

    tokenizer = default_task_assets().tokenizer_dir  # tokenizer.json + tokenizer_config.json
    assert not (tokenizer / "config.json").exists()
    monkeypatch.chdir(tmp_path)  # the OpenRLHF command names reward_func.py
    (tmp_path / "reward_func.py").write_text(OPENRLHF_REWARD)
    runs = {}
    try:
        for name, (source, local) in RUNS.items():
            result, _ = _import(source, name)
            config = copy.deepcopy(result.config)
            # The hf engine instead of vLLM: the vLLM engine's own sizes go with it.
            config["rollout"] = {k: v for k, v in config["rollout"].items() if k not in VLLM_ONLY}
            config.pop("rollout_correction", None)  # it reads vLLM's log-probs, hf has none
            config_file = tmp_path / f"{name}.hfsdk.yaml"
            config_file.write_text(yaml.safe_dump(config))
            extra = []
            if name == "verl_generated_ppo_trainer.yaml":  # every role reads a tokenizer-only dir
                extra = [
                    f"{r}.tokenizer_path={tokenizer}" for r in ("actor", "critic", "reference")
                ]
            cfg = load_run_config(None, str(config_file), [*LOCAL, *local, *extra])
            runs[name] = (cfg, Trainer(cfg, str(tmp_path / name), quiet=True).fit())
    finally:
        shutdown()
    for name, (_, rows) in runs.items():
        assert [r["step"] for r in rows] == [1, 2], name
        assert all(0.0 <= r["reward/mean"] <= 1.0 for r in rows), name
    ppo = runs["verl_generated_ppo_trainer.yaml"][0]
    assert ppo.critic.tokenizer_path == ppo.reference.tokenizer_path == str(tokenizer)
    megatron = runs["verl_run_grpo_megatron.sh"][0]
    assert megatron.actor.backend == megatron.reference.backend == "megatron"
    assert runs["verl_run_dapo.sh"][0].actor.micro_batch_tokens == 12288
    assert runs["verl_run_grpo_fsdp_vllm.sh"][0].algorithm.kl_estimator == "low_var_kl"
    assert runs["trl_grpo_command.sh"][0].algorithm.kl_loss_coef == 0.04
    assert "critic/vf_loss" in runs["openrlhf_train_ppo_ray.sh"][1][-1]
    assert "critic/vf_loss" in runs["verl_generated_ppo_trainer.yaml"][1][-1]


def test_hydra_overrides_add_replace_and_delete() -> None:
    data = {"a": {"b": 1, "c": [1, 2]}, "d": "x"}
    out = compose(
        [], "x", ["a.b=2", "+a.e=[x, y]", "++f.g=null", "~d", "a.c='[3]'", "+h=${a.b}", "+i=1e-6"],
        primary=data,
    )  # fmt: skip
    # Hydra's grammar: 1e-6 is a float, a quoted value a string, ${...} kept for OmegaConf.
    assert out == {"a": {"b": 2, "c": "[3]", "e": ["x", "y"]}, "f": {"g": None}, "h": "${a.b}",
                   "i": 1e-6}  # fmt: skip
    assert data["d"] == "x"  # a copy
    with pytest.raises(
        Exception, match="no defaults list, so it is the whole config and lacks 'h'"
    ):
        compose([], "x", ["h=1"], primary=data)  # a key the file does not have is refused


def test_interpolation_cycles_and_unset_env_are_named_not_fatal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    resolved, problems = resolve(
        {"a": "${b}", "b": "${a}", "e": "${oc.env:NOT_SET_ANYWHERE}", "r": "${oc.nope:x}"}
    )
    assert resolved == {"a": "${b}", "b": "${a}", "e": "${oc.env:NOT_SET_ANYWHERE}",
                        "r": "${oc.nope:x}"}  # fmt: skip
    assert [p.partition(": ")[0] for p in problems] == [
        "a = '${b}' left as written", "b = '${a}' left as written",
        "e = '${oc.env:NOT_SET_ANYWHERE}' left as written",
        "r = '${oc.nope:x}' left as written",
    ]  # fmt: skip
    assert "NOT_SET_ANYWHERE" in problems[2] and "oc.nope" in problems[3]


def test_filter_groups_in_a_run_with_kl_stays_grpo_and_is_listed() -> None:
    result, cfg = _import(
        "verl", "verl_run_dapo.sh",
        "actor_rollout_ref.actor.use_kl_loss=True", "actor_rollout_ref.actor.kl_loss_coef=0.01",
    )  # fmt: skip
    assert cfg.algo == "grpo"
    joined = "\n".join(result.unmapped)
    assert "algorithm.filter_groups.enable = True  (the dapo algorithm" in joined


def test_out_naming_the_imported_file_is_refused_and_the_file_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "grpo.yaml"
    source.write_text("num_generations: 4\n")
    code, _, err = _hfsdk(
        capsys, "config", "import", "--from", "trl", str(source), "--out", str(source)
    )
    assert code == 2 and "is the file being imported" in err
    assert source.read_text() == "num_generations: 4\n"


def test_total_epochs_with_an_unreadable_parquet_are_listed(tmp_path: Path) -> None:
    # A git-lfs pointer (or any non-parquet bytes) cannot be counted: listed, not a crash.
    bad = tmp_path / "train.parquet"
    bad.write_text("version https://git-lfs.github.com/spec/v1\n")
    data = {"algorithm": {"adv_estimator": "grpo"}, "trainer": {"total_epochs": 2},
            "data": {"train_files": str(bad), "train_batch_size": 1},
            "actor_rollout_ref": {"rollout": {"n": 4}}}  # fmt: skip
    result = import_config("verl", data)
    assert any(
        line.startswith("trainer.total_epochs = 2  (hfsdk counts") for line in result.unmapped
    )


def test_openrlhf_gspo_and_no_advantage_std_norm_map() -> None:
    flags = ["--advantage_estimator", "reinforce", "--policy_loss_type", "gspo",
             "--no_advantage_std_norm"]  # fmt: skip
    data, _ = read_source("openrlhf", None, flags)
    assert data["no_advantage_std_norm"] is True
    result = import_config("openrlhf", data)
    assert result.config["algorithm"]["policy_loss"] == "gspo"
    assert "clip_ratio_c" not in result.config["policy_loss"]
    (line,) = [u for u in result.unmapped if u.startswith("no_advantage_std_norm")]
    assert "always divides by the batch std" in line
    # group_norm normalises per group whatever the flag says (OpenRLHF reads it for its
    # batch whitening only), as hfsdk's grpo with norm_by_std does.
    data, _ = read_source("openrlhf", None, ["--advantage_estimator", "group_norm",
                                             "--no_advantage_std_norm", "--policy_loss_type", "ppo",
                                             "--n_samples_per_prompt", "4"])  # fmt: skip
    result = import_config("openrlhf", data)
    assert "policy_loss" not in result.config["algorithm"]
    assert not any(u.startswith(("no_advantage", "policy_loss_type")) for u in result.unmapped)
    assert read_source("trl", None, ["--no_bf16"])[0] == {"bf16": False}
