"""The reward-model program against a fake scorer role: the pairs it sends, its metrics."""

from __future__ import annotations

import pytest
import torch

import hfsdk
from hfsdk import AlgorithmContext, Batch
from hfsdk.core.config import load_run_config
from hfsdk_reward_model.spec import REWARD_MODEL_SPEC
from hfsdk_testing import FakeRole


class _FakeScorer(FakeRole):
    """Scores each row by its response length; records the update's batch."""

    def update_score_model(self, batch: Batch) -> dict[str, float]:
        self._record("update_score_model", batch)
        return {"score_model/loss": 0.5}

    def compute_scores(self, batch: Batch) -> Batch:
        self._record("compute_scores", batch)
        return Batch.from_dict(tensors={"rm_scores": batch["response_mask"].sum(-1).float()})


def _program(overrides: list[str] | None = None):
    from transformers import PreTrainedTokenizerFast

    from hfsdk import default_task_assets

    config = load_run_config("reward_model", None, overrides or [])
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(default_task_assets().tokenizer_dir))
    role = _FakeScorer("reward_model", [], seed=0, kind="score_model")
    context = AlgorithmContext(
        config=config,
        roles={"reward_model": role},
        signals={},
        spec=REWARD_MODEL_SPEC,
        tokenizer=tokenizer,
    )
    return REWARD_MODEL_SPEC.program(context), role, tokenizer


def _rows() -> Batch:
    ids = torch.ones(3, 2, dtype=torch.long)
    return Batch.from_dict(
        tensors={"input_ids": ids, "attention_mask": ids},
        non_tensors={
            "prompt": ["1 + 2 =", "3 + 3 =", "4 + 0 ="],
            "chosen": ["3", "6", "ugh 4"],
            "rejected": ["ugh 5", "7", "ugh 9"],
        },
    )


def test_a_step_sends_interleaved_pairs_kept_whole() -> None:
    program, role, tokenizer = _program()
    metrics = program.step(_rows())
    batch = role.batches["update_score_model"]
    assert len(batch) == 6
    assert batch.meta[hfsdk.ROW_GROUP] == 2
    assert batch["chosen"].tolist() == [1, 0, 1, 0, 1, 0]
    assert batch["pair_index"].tolist() == [0, 0, 1, 1, 2, 2]
    responses = [
        tokenizer.decode(r[m.bool()], skip_special_tokens=True)
        for r, m in zip(batch["responses"], batch["response_mask"], strict=True)
    ]
    assert responses == ["3", "ugh 5", "6", "7", "ugh 4", "ugh 9"]
    assert metrics["score_model/loss"] == 0.5
    assert metrics["pairs/count"] == 3.0
    assert {"timing/pairs_s", "timing/update_score_model_s"} <= set(metrics)


def test_validation_reports_pairwise_accuracy_from_the_models_scores() -> None:
    program, _role, _ = _program()
    found = program.validation_metrics(_rows())
    # Scores are response lengths (with EOS): (2 vs 3), (2 vs 2), (3 vs 3): no pair won.
    assert found["val/pairwise_accuracy"] == 0.0
    assert found["val/margin_mean"] == pytest.approx(-1 / 3)
    program, _role, _ = _program(["algorithm.higher=rejected"])
    assert program.validation_metrics(_rows())["val/pairwise_accuracy"] == pytest.approx(1 / 3)


def test_a_validation_rows_error_names_it_a_validation_row() -> None:
    # It said "row 0 has no 'chosen' column value", which reads as a training row.
    program, _role, _ = _program()
    ids = torch.ones(1, 2, dtype=torch.long)
    rows = Batch.from_dict(
        tensors={"input_ids": ids, "attention_mask": ids}, non_tensors={"prompt": ["1 + 2 ="]}
    )
    with pytest.raises(hfsdk.HfsdkError, match=r"^validation row 0 has no 'chosen'"):
        program.validation_metrics(rows)


def test_spec_trains_a_score_model_without_a_policy() -> None:
    spec = hfsdk.get_registry("algorithms")["reward_model"].impl
    assert not spec.has_policy
    assert spec.main_role == "reward_model"
    assert "update_score_model" in spec.timings and "generation" not in spec.timings
    with pytest.raises(hfsdk.HfsdkError, match="no role of kind 'policy'"):
        _ = spec.policy_role


def test_data_without_a_prompt_column_takes_the_shared_beginning() -> None:
    program, role, tokenizer = _program(["data.prompt_key=chosen"])
    ids = torch.ones(2, 2, dtype=torch.long)
    rows = Batch.from_dict(
        tensors={"input_ids": ids, "attention_mask": ids},
        non_tensors={"chosen": ["1 + 2 = 3", "2 + 2 = 4"], "rejected": ["1 + 2 = 5", "2 + 2 = 9"]},
    )
    program.step(rows)
    batch = role.batches["update_score_model"]
    responses = [
        tokenizer.decode(r[m.bool()], skip_special_tokens=True)
        for r, m in zip(batch["responses"], batch["response_mask"], strict=True)
    ]
    assert responses == ["3", "5", "4", "9"]


def test_the_rows_tool_schemas_are_read_from_algorithm_tools_key() -> None:
    from hfsdk.core.config import load_run_config
    from hfsdk_reward_model.rm_algorithm import pair_columns

    # Before: pairs never read a tools column (SFT gave its rows' tools to the template).
    config = load_run_config("reward_model", None, ["algorithm.tools_key=schemas"])
    assert pair_columns(config.algorithm, "prompt").tools == "schemas"
    assert pair_columns(load_run_config("reward_model").algorithm, "prompt").tools == "tools"


def test_the_algorithm_section_has_no_rl_settings() -> None:
    import attrs

    from hfsdk import AlgorithmConfig, TrainerAlgorithmConfig
    from hfsdk.core.config import load_run_config
    from hfsdk_reward_model.rm_config import RewardModelConfig

    assert issubclass(RewardModelConfig, TrainerAlgorithmConfig)
    assert not issubclass(RewardModelConfig, AlgorithmConfig)
    fields = set(attrs.fields_dict(RewardModelConfig))
    assert fields == {
        "margin", "center_coef", "higher", "chosen_key", "rejected_key", "tools_key", "max_length"
    }  # fmt: skip
    config = load_run_config("reward_model")
    # No policy loss, advantage or value-loss section is composed for it either.
    assert not {"policy_loss", "advantage", "value_loss"} & set(config.sections)
    with pytest.raises(hfsdk.ConfigError, match=r"unknown config key 'algorithm\.kl_coef'"):
        load_run_config("reward_model", None, ["algorithm.kl_coef=0.1"])


def test_config_show_lists_only_the_reward_model_settings() -> None:
    import yaml
    from click.testing import CliRunner

    from hfsdk.core.cli.main import cli

    result = CliRunner().invoke(cli, ["config", "show", "--algo", "reward_model"])
    assert result.exit_code == 0, result.output
    shown = yaml.safe_load(result.output)
    assert list(shown["algorithm"]) == [
        "margin", "center_coef", "higher", "chosen_key", "rejected_key", "tools_key", "max_length"
    ]  # fmt: skip
    assert "policy_loss" not in shown


@pytest.mark.parametrize(
    "override",
    ["algorithm.kl_coef=0.1", "policy_loss.clip_ratio=0.3", "advantage.gamma=0.9",
     "value_loss.clip_range_value=0.3"],
)  # fmt: skip
def test_an_rl_setting_is_refused_in_one_line(
    override: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # The loss and estimator sections used to take these silently and drop them.
    from hfsdk.core.cli.main import main

    with pytest.raises(SystemExit) as exited:
        main(["config", "show", "--algo", "reward_model", override])
    assert exited.value.code == 2
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: ") and not out
    key = override.partition("=")[0]
    assert key in lines[0]
    if not key.startswith("algorithm."):
        assert "'reward_model' trains no policy" in lines[0]


def test_a_run_prepares_without_a_policy_role() -> None:
    # The preflight used to ask the spec for its policy role and refused every reward-model
    # run ("has no role of kind 'policy'"); the scorer being trained is the run's model.
    from hfsdk.core.trainer.preflight import prepare_run

    config = load_run_config("reward_model", None, ["trainer.total_steps=1"])
    prepared = prepare_run(config, REWARD_MODEL_SPEC)
    assert prepared is not None


def test_a_stop_finds_the_reward_models_hf_export(tmp_path) -> None:
    # A SIGTERM on a checkpoint step asked the spec for its policy role and failed with
    # "has no role of kind 'policy'" instead of the stop's own message and export.
    from hfsdk.core.trainer.trainer import Trainer

    trainer = Trainer(load_run_config("reward_model", None, []), tmp_path, quiet=True)
    assert not trainer._has_hf_export(2)
    (tmp_path / "checkpoints" / "step_2" / "reward_model_hf").mkdir(parents=True)
    assert trainer._has_hf_export(2)
