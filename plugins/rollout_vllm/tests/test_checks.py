"""Bad input is refused with one line naming the fix, before Ray or vLLM start."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from hfsdk.core.cli.main import main
from hfsdk.core.config import load_run_config
from hfsdk.core.errors import HfsdkError
from hfsdk_rollout_vllm import checks
from hfsdk_rollout_vllm.vllm_config import VLLMRolloutConfig


def _hfsdk(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as info:
        main(list(args))
    _out, err = capsys.readouterr()
    return int(info.value.code or 0), err.strip()


def _narrow_head_model(directory: Path) -> Path:
    """A model directory whose config declares head_dim 16 (no weights needed for the check)."""
    directory.mkdir()
    (directory / "config.json").write_text(
        '{"model_type": "llama", "hidden_size": 32, "num_attention_heads": 2}'
    )
    return directory


def test_the_default_config_selects_vllm() -> None:
    config = load_run_config("grpo", None, ["rollout.backend=vllm"])
    assert isinstance(config.rollout, VLLMRolloutConfig)
    assert config.rollout.max_response_length == 8  # the default task's preset still applies
    assert config.rollout.temperature == 1.0 and config.rollout.cpu_kv_cache_gib == 1


def test_head_dim_below_32_on_cpu(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    model = _narrow_head_model(tmp_path / "narrow")
    args = ["rollout.backend=vllm", f"actor.model_path={model}", "actor.device=cpu"]
    code, err = _hfsdk(capsys, "run", "--algo", "grpo", *args)
    assert code == 2 and "\n" not in err and "Traceback" not in err
    assert "head_dim=16" in err and "head_dim >= 32" in err and "rollout.backend=hf" in err
    assert checks.servable_problem(model, 16, on_cpu=False) is None  # CUDA kernels take it
    # GPT-2's config.json names them n_embd and n_head: it failed mid-run instead.
    gpt2 = tmp_path / "gpt2"
    gpt2.mkdir()
    (gpt2 / "config.json").write_text('{"model_type": "gpt2", "n_embd": 64, "n_head": 4}')
    assert checks.head_dim(gpt2) == 16


def test_vllm_not_installed(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real(name, *a)
    )
    code, err = _hfsdk(capsys, "run", "--algo", "grpo", "rollout.backend=vllm")
    assert code == 2 and "\n" not in err
    assert "vLLM, which is not installed" in err and "hfsdk-plugin-rollout-vllm[cpu]" in err
    with pytest.raises(HfsdkError, match="not installed"):
        checks.require_servable(Path("."), on_cpu=True)


def test_unknown_sampling_option(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _hfsdk(capsys, "run", "--algo", "grpo", "rollout.backend=vllm", "rollout.top_q=0.9")
    assert code == 2 and "\n" not in err
    assert "'rollout.top_q'" in err and "top_p" in err


def test_bad_sampling_value(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _hfsdk(capsys, "run", "--algo", "grpo", "rollout.backend=vllm", "rollout.top_p=0")
    assert code == 2 and "\n" not in err and "top_p" in err


def _megatron_model(directory: Path, **changes: object) -> Path:
    """A config-only Llama directory (the checks read config.json, never weights)."""
    import json

    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": 101,
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "tie_word_embeddings": False,
        **changes,
    }
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps(config))
    return directory


def _megatron_vllm(model: Path, tp: int, *extra: str) -> list[str]:
    return [
        "rollout.backend=vllm",
        f"actor.model_path={model}",
        "actor.device=cpu",
        "actor.backend=megatron",
        f"actor.parallel.tp={tp}",
        f"placement.pools.global.devices={tp}",
        *extra,
    ]


def test_megatron_actor_feeds_vllm(tmp_path: Path) -> None:
    """Any model the megatron actor trains passes: tied and Qwen2 ones go through hf_weights."""
    for changes in ({}, {"tie_word_embeddings": True}, {"model_type": "qwen2"}):
        model = _megatron_model(tmp_path / str(len(list(tmp_path.iterdir()))), **changes)
        for extra in ([], ["actor.rollout_layout.tp=1"]):
            config = load_run_config("grpo", None, _megatron_vllm(model, 2, *extra))
            assert checks.run_config_problems(config) == []
    default = load_run_config("grpo", None, ["rollout.backend=vllm", "actor.backend=megatron"])
    assert checks.run_config_problems(default) == []


def test_narrow_heads_are_a_one_line_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    model = _megatron_model(tmp_path / "m", hidden_size=64)
    code, err = _hfsdk(capsys, "run", "--algo", "grpo", *_megatron_vllm(model, 4))
    assert code == 2 and "\n" not in err and "Traceback" not in err, err
    assert "head_dim=16" in err


class _Shards:
    """What :func:`vllm_layout_problem` reads of an actor's generation shards."""

    def __init__(self, tg: int, pg: int, tp_ranks: tuple[int, ...]) -> None:
        self.tg, self.pg, self.tp_ranks = tg, pg, tp_ranks


def test_vllm_takes_consecutive_generation_groups_only() -> None:
    from hfsdk_rollout_vllm.hybrid_vllm import vllm_layout_problem

    assert vllm_layout_problem(_Shards(1, 1, (3,))) is None
    assert vllm_layout_problem(_Shards(2, 1, (2, 3))) is None
    # tg=2 inside training tp=4: the generation groups are strided ({0, 2}), not vLLM's.
    problem = vllm_layout_problem(_Shards(2, 1, (0, 2)))
    assert problem is not None and "[0, 2]" in problem and "\n" not in problem
    assert "pp=2" in str(vllm_layout_problem(_Shards(1, 2, (0,))))


@pytest.mark.parametrize(
    ("setting", "why"),
    [
        ("rollout.decoder=transformers", "vLLM decodes itself"),
        ("rollout.decoder=hfsdk", "vLLM decodes itself"),
        ("rollout.weight_sync=gather", "streaming"),
    ],
)
def test_hf_only_keys_are_refused(
    capsys: pytest.CaptureFixture[str], setting: str, why: str
) -> None:
    """The hf rollout's decoder / weight_sync keys would be accepted and ignored under vLLM."""
    key = setting.split("=")[0]
    with pytest.raises(HfsdkError) as info:
        load_run_config("grpo", None, ["rollout.backend=vllm", setting])
    line = str(info.value)
    assert "\n" not in line and key in line and why in line and "rollout.backend=hf" in line
    code, err = _hfsdk(capsys, "run", "--algo", "grpo", "rollout.backend=vllm", setting)
    assert code == 2 and "\n" not in err and "Traceback" not in err and key in err
    default = load_run_config("grpo", None, ["rollout.backend=vllm"])
    assert checks.hf_only_key_problem(default.rollout) is None
