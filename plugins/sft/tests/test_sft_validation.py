"""SFT's config checks: settings its program cannot honour are refused before the run."""

from __future__ import annotations

import pytest

import hfsdk
from hfsdk.core.config import load_run_config


def test_the_run_config_refuses_a_reference_kl_loss() -> None:
    # Before: accepted, then step 1 failed asking for ref_log_probs ("run the earlier stages").
    with pytest.raises(hfsdk.ConfigError, match=r"kl_loss_coef=0.1: SFT has no reference role"):
        load_run_config("sft", None, ["algorithm.kl_loss_coef=0.1"])


def test_the_default_sft_config_passes() -> None:
    assert load_run_config("sft", None, []).algorithm.kl_loss_coef == 0
