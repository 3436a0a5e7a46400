"""Every standard rollout correction against a hand computation, their composition, the
presets that name them, and the line a run gets when their plugin is not loaded."""

from __future__ import annotations

import math

import pytest
import torch

import hfsdk
from hfsdk import ConfigError, get_registry, load_run_config
from hfsdk.core.plugin_manager import reset_plugin_manager
from hfsdk_rollout_corrections.contract import combine_corrections
from hfsdk_rollout_corrections.corrections import (
    BandConfig,
    DSV32MaskConfig,
    GeoRSConfig,
    K3RSConfig,
    MISConfig,
    TISConfig,
    TrustRegionConfig,
)
from hfsdk_rollout_corrections.section import PRESETS, resolve_rollout_corrections

# Two sequences, 3 and 2 valid tokens. δ = old − rollout: row 0: 0.5, −1.0, 0.0; row 1: 1.0, 0.0
OLD = torch.tensor([[-1.0, -2.0, -0.5, 0.0], [-1.0, -1.0, 0.0, 0.0]])
ROLLOUT = torch.tensor([[-1.5, -1.0, -0.5, -9.0], [-2.0, -1.0, -9.0, -9.0]])
MASK = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
E = math.e


def _rows(rows: list[list[float]]) -> torch.Tensor:
    out = torch.zeros(2, 4)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row)
    return out


def _run(name: str, config, *, log_prob=OLD, advantages=None, rollout=ROLLOUT):
    fn = get_registry("rollout_corrections")[name].impl
    return fn(
        old_log_prob=OLD,
        rollout_log_prob=rollout,
        log_prob=log_prob,
        advantages=torch.ones(2, 4) if advantages is None else advantages,
        response_mask=MASK,
        config=config,
    )


def test_every_builtin_is_registered_and_listed() -> None:
    names = set(get_registry("rollout_corrections"))
    assert {"tis", "mis", "icepop", "geo_rs", "k3_rs", "trust_region", "dsv32_mask"} <= names


@pytest.mark.parametrize(
    ("level", "weights", "share"),
    [
        ("token", [[E**0.5, E**-1, 1.0], [2.0, 1.0]], 1 / 5),
        # sequence ratios: row 0 exp(−0.5), row 1 exp(1) > 2 (both tokens over the cap)
        ("sequence", [[E**-0.5] * 3, [2.0, 2.0]], 2 / 5),
    ],
)
def test_tis_truncates_the_ratio(level, weights, share) -> None:
    result = _run("tis", TISConfig(cap=2.0, level=level))
    torch.testing.assert_close(result.weights, _rows(weights))
    assert torch.equal(result.keep, MASK.bool())
    assert result.metrics["tis_truncated_share"] == pytest.approx(share)


@pytest.mark.parametrize(
    ("level", "weights", "keep"),
    [
        ("token", [[E**0.5, E**-1, 1.0], [0.0, 1.0]], [[1, 1, 1], [0, 1]]),
        ("sequence", [[E**-0.5] * 3, [0.0, 0.0]], [[1, 1, 1], [0, 0]]),
    ],
)
def test_mis_drops_what_is_over_the_cap(level, weights, keep) -> None:
    result = _run("mis", MISConfig(cap=2.0, level=level))
    torch.testing.assert_close(result.weights, _rows(weights))
    assert torch.equal(result.keep, _rows(keep).bool())


def test_icepop_weights_tokens_in_the_band_by_their_ratio_and_drops_the_rest() -> None:
    # IcePop's M(k) = k for k in [α, β], else 0 (Ring-1T, arXiv 2510.18855), α = 1/c, β = c.
    # ρ: e^0.5 = 1.65 in, e^-1 = 0.37 < 1/2 out, 1 in; e = 2.72 > 2 out, 1 in.
    # Before: in-band tokens kept weight 1.0 (a mask, not M(k)).
    result = _run("icepop", BandConfig(c=2.0))
    assert torch.equal(result.keep, _rows([[1, 0, 1], [0, 1]]).bool())
    torch.testing.assert_close(result.weights, _rows([[E**0.5, 0.0, 1.0], [0.0, 1.0]]))
    assert result.metrics["icepop_masked_share"] == pytest.approx(2 / 5)


def test_geo_rs_rejects_on_the_geometric_mean() -> None:
    # mean δ: row 0 −0.5/3 = −0.167 (|.| < log 1.2 = 0.182), row 1 0.5 (out).
    result = _run("geo_rs", GeoRSConfig(c=1.2))
    assert torch.equal(result.keep, _rows([[1, 1, 1], [0, 0]]).bool())
    assert result.metrics["geo_rs_masked_seq_share"] == pytest.approx(
        (1 / 2, 2)
    )  # (share, sequences)
    assert result.metrics["geo_rs_masked_share"] == pytest.approx(2 / 5)
    tight = _run("geo_rs", GeoRSConfig(c=1.1))  # log 1.1 = 0.095 < 0.167: both out
    assert not bool(tight.keep.any())


@pytest.mark.parametrize(
    ("threshold", "keep"), [(0.2, [[1, 1, 1], [0, 0]]), (0.1, [[0] * 3, [0, 0]])]
)
def test_k3_rs_rejects_on_the_mean_k3(threshold, keep) -> None:
    # k3 = e^δ − 1 − δ. Row 0: (e^0.5 − 1.5 + e^-1 + 0) / 3 = 0.1722; row 1: (e − 2) / 2 = 0.3591.
    row0 = (E**0.5 - 1.5 + E**-1) / 3
    row1 = (E - 2) / 2
    assert row0 < 0.2 < row1 and row0 > 0.1
    result = _run("k3_rs", K3RSConfig(threshold=threshold))
    assert torch.equal(result.keep, _rows(keep).bool())


def test_trust_region_drops_a_sequence_with_one_far_token() -> None:
    # Row 1's first token: δ = 0.3 instead of 1.0; row 0 keeps its |δ| = 1.0 token.
    rollout = ROLLOUT.clone()
    rollout[1, 0] = -1.3
    result = _run("trust_region", TrustRegionConfig(delta=0.5), rollout=rollout)
    assert torch.equal(result.keep, _rows([[0, 0, 0], [1, 1]]).bool())
    assert result.metrics["trust_region_masked_seq_share"] == pytest.approx((1 / 2, 2))
    loose = _run("trust_region", TrustRegionConfig(delta=1.0), rollout=rollout)
    assert torch.equal(loose.keep, MASK.bool())  # |δ| = 1.0 is not above 1.0


def test_dsv32_masks_only_negative_advantage_sequences_far_from_the_behaviour_policy() -> None:
    # With log π_θ = log π_old: mean(log μ − log π_θ) = row 0: 0.5/3 = 0.167, row 1: −0.5.
    negative = -torch.ones(2, 4)
    result = _run("dsv32_mask", DSV32MaskConfig(delta=0.1), advantages=negative)
    assert torch.equal(result.keep, _rows([[0, 0, 0], [1, 1]]).bool())
    positive = torch.tensor([[1.0] * 4, [-1.0] * 4])
    kept = _run("dsv32_mask", DSV32MaskConfig(delta=0.1), advantages=positive)
    assert torch.equal(kept.keep, MASK.bool())  # row 0's advantage is positive
    assert _run("dsv32_mask", DSV32MaskConfig(delta=0.2), advantages=negative).keep.all() == (
        MASK.bool().all()
    )


def test_composition_multiplies_weights_and_intersects_masks() -> None:
    registry = get_registry("rollout_corrections")
    result = combine_corrections(
        [
            ("geo_rs", registry["geo_rs"].impl, GeoRSConfig(c=1.2)),
            ("tis", registry["tis"].impl, TISConfig(cap=1.5)),
        ],
        old_log_prob=OLD,
        rollout_log_prob=ROLLOUT,
        log_prob=OLD,
        advantages=torch.ones(2, 4),
        response_mask=MASK,
    )
    torch.testing.assert_close(result.weights, _rows([[1.5, E**-1, 1.0], [0.0, 0.0]]))
    assert result.metrics["is_kept_share"] == pytest.approx(3 / 5)
    assert result.metrics["is_weight_mean"] == pytest.approx(
        ((1.5 + E**-1 + 1.0) / 3, 3)
    )  # (mean, kept)
    assert result.metrics["is_weight_max"] == pytest.approx(1.5)
    assert result.metrics["is_ratio_max"] == pytest.approx(E)
    assert result.metrics["tis_truncated_share"] == pytest.approx(2 / 5)


def _combine_one(name: str, weights: torch.Tensor, keep: torch.Tensor | None = None):
    """``combine_corrections`` of one plugin correction returning ``weights`` (and ``keep``)."""
    from hfsdk_rollout_corrections.contract import CorrectionResult

    def correction(*, response_mask: torch.Tensor, **_) -> CorrectionResult:
        return CorrectionResult(weights=weights, keep=response_mask if keep is None else keep)

    mask = torch.ones(weights.shape[0], weights.shape[0], dtype=torch.long)
    zeros = torch.zeros(mask.shape)
    return combine_corrections(
        [(name, correction, None)],
        old_log_prob=zeros,
        rollout_log_prob=zeros,
        log_prob=zeros,
        advantages=zeros,
        response_mask=mask,
    )


def test_a_per_sequence_weight_is_refused_even_when_it_would_broadcast() -> None:
    # (B,) with B == T broadcast along the tokens before: row i got [1, 2, 3].
    with pytest.raises(hfsdk.HfsdkError, match=r"rollout correction 'per_seq' returned weights "):
        _combine_one("per_seq", torch.tensor([1.0, 2.0, 3.0]))


@pytest.mark.parametrize("bad", [float("nan"), -1.0, float("inf")])
def test_a_nan_or_negative_weight_on_a_kept_token_is_refused(bad: float) -> None:
    weights = torch.ones(3, 3)
    weights[1, 2] = bad
    with pytest.raises(hfsdk.HfsdkError, match=r"rollout correction 'odd' returned weight"):
        _combine_one("odd", weights)
    # On a token the correction drops it never reaches the loss: taken, and zeroed.
    keep = torch.ones(3, 3, dtype=torch.bool)
    keep[1, 2] = False
    assert _combine_one("odd", weights, keep).weights[1, 2] == 0.0


OFF_POLICY = ["trainer.pipeline=one_step_off"]  # a run whose rollout gives log-probs to correct


def test_a_rollout_without_log_probs_under_sync_is_refused_at_load() -> None:
    # Before: a correction failed the first update as a worker failure (exit 3), and the
    # mismatch gate watched nothing, silently.
    for setting, asks in (("rollout_correction.preset=tis", "rollout_correction"),
                          ("trainer.max_mismatch_kl=0.1", "trainer.max_mismatch_kl")):  # fmt: skip
        with pytest.raises(ConfigError, match=f"^{asks}.* which rollout backend 'hf' does not re"):
            load_run_config("grpo", None, [setting])
        load_run_config("grpo", None, [setting, *OFF_POLICY])
        load_run_config("grpo", None, [setting, "rollout.backend=vllm"])


@pytest.mark.parametrize("algo", ["dpo", "sft", "reward_model"])
@pytest.mark.parametrize("backend", ["hf", "vllm"])
@pytest.mark.parametrize(
    "setting",
    ["algorithm.is_correction=tis", "rollout_correction.apply=[dsv32_mask]",
     "trainer.max_mismatch_kl=0.1"],
)  # fmt: skip
def test_an_algorithm_that_samples_nothing_is_refused_a_correction_or_the_gate(
    algo: str, backend: str, setting: str
) -> None:
    # Before: accepted with vllm (the run died at update_actor, or the gate checked nothing)
    # and refused with hf by advice to switch to vllm.
    if algo == "reward_model" and setting.startswith("algorithm."):
        pytest.skip("a reward model's algorithm section has no is_correction key")
    with pytest.raises(ConfigError) as info:
        load_run_config(algo, None, [setting, f"rollout.backend={backend}"])
    line = str(info.value)
    assert line.startswith(f"{setting.split('=')[0].removesuffix('.apply')} has nothing to ")
    assert f"algorithm {algo!r} samples nothing" in line and "remove" in line
    assert "rollout.backend=vllm" not in line and "\n" not in line


@pytest.mark.parametrize("backend", ["hf", "vllm"])
@pytest.mark.parametrize(
    "setting",
    ["algorithm.is_correction=tis", "rollout_correction.preset=tis",
     "rollout_correction.apply=[icepop]", "trainer.max_mismatch_kl=0.1"],
)  # fmt: skip
def test_rollout_only_is_refused_a_correction_or_the_gate(backend: str, setting: str) -> None:
    # Before: accepted with a rollout pool (no old_log_probs are computed, so nothing was
    # corrected or compared, silently), and with hf refused by advice to use
    # trainer.pipeline=one_step_off, which rollout_only refuses.
    pool = ["placement.pools.global.devices=1", "placement.pools.rollout.devices=1"]
    for extra in ([], pool):
        with pytest.raises(ConfigError) as info:
            load_run_config(
                "grpo",
                None,
                ["trainer.mode=rollout_only", setting, f"rollout.backend={backend}", *extra],
            )
        line = str(info.value)
        key = setting.split("=")[0].removesuffix(".apply").removesuffix(".preset")
        assert line.startswith(f"{key} has nothing to "), line
        assert "trainer.mode: rollout_only" in line and "trainer.mode: train" in line
        assert "one_step_off" not in line and "rollout.backend" not in line and "\n" not in line


def test_presets_and_apply_resolve_in_order() -> None:
    config = load_run_config(
        "grpo",
        None,
        [*OFF_POLICY, "rollout_correction.preset=geo_rs_tis", "rollout_correction.apply=[icepop]"],
    )
    assert [
        name
        for name, _fn, _cfg in resolve_rollout_corrections(
            config, get_registry("rollout_corrections")
        )
    ] == [
        "geo_rs",
        "tis",
        "icepop",
    ]
    for name in PRESETS:
        load_run_config("grpo", None, [*OFF_POLICY, f"rollout_correction.preset={name}"])


def test_the_older_is_correction_keys_still_work() -> None:
    config = load_run_config(
        "grpo",
        None,
        [
            *OFF_POLICY,
            "algorithm.is_correction=mis",
            "algorithm.is_cap=3",
            "algorithm.is_level=sequence",
        ],
    )
    [(name, _fn, cfg)] = resolve_rollout_corrections(config, get_registry("rollout_corrections"))
    assert (name, cfg) == ("mis", MISConfig(cap=3.0, level="sequence"))


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        (["rollout_correction.preset=icepopp"], "'rollout_correction.preset': 'icepopp'"),
        (["rollout_correction.apply=[icepopp]"], "did you mean 'icepop'"),
        (["rollout_correction.apply=[{name: icepop, c: 0.5}]"], "'rollout_correction.apply[0].c'"),
        (["rollout_correction.apply=[{name: tis, caps: 2}]"], "caps"),
        (["algorithm.is_correction=tis", "rollout_correction.preset=mis"], "keep one"),
    ],
)
def test_bad_settings_are_one_line(overrides, needle) -> None:
    with pytest.raises(ConfigError) as info:
        load_run_config("grpo", None, overrides)
    assert needle in str(info.value)
    assert "\n" not in str(info.value)


def test_the_docs_example_resolves_as_written(tmp_path) -> None:
    from pathlib import Path

    text = (Path(__file__).parents[3] / "docs" / "async.md").read_text()
    block = text.split("```yaml\nrollout_correction:", 1)[1].split("```", 1)[0]
    (tmp_path / "run.yaml").write_text("rollout_correction:" + block)
    config = load_run_config("grpo", str(tmp_path / "run.yaml"), OFF_POLICY)
    resolved = resolve_rollout_corrections(config, get_registry("rollout_corrections"))
    assert [name for name, _fn, _cfg in resolved] == ["geo_rs", "icepop", "k3_rs"]
    assert resolved[-1][2] == K3RSConfig(threshold=0.02)


LOADED_WITHOUT = "grpo,backend_common,backend_fsdp,tasks,rewards,policy_losses"
"""What a GRPO run needs, less this plugin."""


@pytest.mark.parametrize("variable", ["HFSDK_DISABLE_PLUGINS", "HFSDK_LOAD_PLUGINS"])
@pytest.mark.parametrize(
    "setting",
    ["rollout_correction.preset=tis", "algorithm.is_correction=tis", "trainer.max_mismatch_kl=0.1"],
)
def test_a_correction_without_the_plugin_names_the_distribution(
    monkeypatch: pytest.MonkeyPatch, variable: str, setting: str
) -> None:
    """Disabled (or not loaded): one line naming the distribution, not 'unknown section' (nor a
    setting that nothing would read: the older key, the gate on this plugin's metrics)."""
    value = "rollout_corrections" if variable == "HFSDK_DISABLE_PLUGINS" else LOADED_WITHOUT
    monkeypatch.setenv(variable, value)
    reset_plugin_manager()
    try:
        # The registry kind is this plugin's too; a run without corrections (the backends'
        # actor objective resolves them) still resolves to none.
        with pytest.raises(hfsdk.HfsdkError, match="unknown registry kind"):
            get_registry("rollout_corrections")
        assert resolve_rollout_corrections(load_run_config("grpo", None, [])) == []
        assert not hfsdk.behaviour_log_probs_needed(load_run_config("grpo", None, []))
        with pytest.raises(ConfigError) as info:
            load_run_config("grpo", None, [setting])
    finally:
        monkeypatch.delenv(variable)
        reset_plugin_manager()
    message = str(info.value)
    assert "hfsdk-plugin-rollout-corrections" in message and "\n" not in message
    key = setting.split("=")[0]
    assert f"config key {key.split('.')[0] if key.startswith('rollout_') else key!r}" in message


@pytest.mark.parametrize(
    ("overrides", "needed"),
    [
        ([], False),
        (["rollout_correction.preset=icepop"], True),
        (["algorithm.is_correction=mis"], True),
        (["trainer.max_mismatch_kl=0.1"], True),
    ],
)
def test_behaviour_log_probs_are_needed_by_a_correction_or_the_gate(
    overrides: list[str], needed: bool
) -> None:
    assert (
        hfsdk.behaviour_log_probs_needed(load_run_config("grpo", None, [*OFF_POLICY, *overrides]))
        is needed
    )


@pytest.mark.parametrize(
    "overrides",
    [
        ["rollout_correction.preset=tis", "algorithm.is_cap=5", "algorithm.is_level=sequence"],
        ["algorithm.is_cap=5"],
        ["algorithm.is_level=sequence"],
    ],
)
def test_is_cap_and_is_level_without_is_correction_are_refused(overrides) -> None:
    # Before: ignored silently (the preset's tis kept cap 2.0 per token; alone, no correction).
    with pytest.raises(ConfigError) as info:
        load_run_config("grpo", None, [*OFF_POLICY, *overrides])
    line = str(info.value)
    assert "algorithm.is_correction=tis" in line and "rollout_correction.apply=[{name: tis" in line
    assert "\n" not in line


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        (
            ["rollout_correction.preset=geo_rs_tis", "rollout_correction.apply=[{name: tis, cap: -1}]"],
            "'rollout_correction.apply[0].cap'",
        ),
        (["rollout_correction.preset=k3_rs_tis", "rollout_correction.apply=[icepopp]"],
         "rollout_correction.apply[0]: unknown"),
    ],
)  # fmt: skip
def test_apply_entries_are_numbered_on_their_own(overrides, needle) -> None:
    # Before: the index counted the preset's entries too (apply[2] for apply's first).
    with pytest.raises(ConfigError) as info:
        load_run_config("grpo", None, [*OFF_POLICY, *overrides])
    assert needle in str(info.value)


@pytest.mark.parametrize(
    ("overrides", "first", "second", "name"),
    [
        (["rollout_correction.preset=tis", "rollout_correction.apply=[{name: tis, cap: 3}]"],
         "rollout_correction.preset='tis'", "rollout_correction.apply[0]", "tis"),
        (["rollout_correction.preset=geo_rs_tis", "rollout_correction.apply=[icepop, tis]"],
         "rollout_correction.preset='geo_rs_tis'", "rollout_correction.apply[1]", "tis"),
        (["rollout_correction.apply=[mis, {name: mis, level: sequence}]"],
         "rollout_correction.apply[0]", "rollout_correction.apply[1]", "mis"),
    ],
)  # fmt: skip
def test_a_correction_named_twice_is_refused(overrides, first, second, name) -> None:
    # Before: it ran twice (tis's weights squared).
    with pytest.raises(ConfigError) as info:
        load_run_config("grpo", None, [*OFF_POLICY, *overrides])
    line = str(info.value)
    assert line.startswith(f"{second} names correction {name!r}, which {first} applies already")
    assert ("remove rollout_correction.preset" in line) is ("preset" in first)
    assert f"{{name: {name}, <the settings wanted>}}" in line and "\n" not in line


def test_preset_and_legacy_entries_are_labelled_by_their_key() -> None:
    registry = {"geo_rs": get_registry("rollout_corrections")["geo_rs"]}  # no tis
    config = load_run_config("grpo", None, [*OFF_POLICY, "rollout_correction.preset=geo_rs_tis"])
    with pytest.raises(ConfigError, match=r"^rollout_correction.preset: "):
        resolve_rollout_corrections(config, registry)
    config = load_run_config("grpo", None, [*OFF_POLICY, "algorithm.is_correction=tis"])
    with pytest.raises(ConfigError, match=r"^algorithm.is_correction: "):
        resolve_rollout_corrections(config, registry)


@pytest.mark.parametrize(
    ("which", "bad"),
    [("old", math.nan), ("rollout", math.nan), ("rollout", -math.inf), ("old", math.inf)],
)
def test_non_finite_log_probs_are_named_not_blamed_on_the_correction(which, bad) -> None:
    # Before: "rollout correction 'tis' returned weight nan ..." for a NaN in the inputs.
    old, rollout = OLD.clone(), ROLLOUT.clone()
    (old if which == "old" else rollout)[1, 1] = bad
    tis = [("tis", get_registry("rollout_corrections")["tis"].impl, TISConfig())]

    def combine() -> None:
        combine_corrections(
            tis,
            old_log_prob=old,
            rollout_log_prob=rollout,
            log_prob=OLD,
            advantages=torch.ones(2, 4),
            response_mask=MASK,
        )

    with pytest.raises(hfsdk.HfsdkError) as info:
        combine()
    line = str(info.value)
    name, other = ("old_log_probs", "rollout_log_probs")[:: 1 if which == "old" else -1]
    assert line.startswith(f"{name} is non-finite") and other not in line.split(";")[0]
    assert "1 valid token" in line and "row 1" in line and "returned weight" not in line
    # Off the response mask (padding) a non-finite log-prob never reaches the loss: taken.
    (old if which == "old" else rollout)[1, 1] = -1.0
    (old if which == "old" else rollout)[1, 3] = bad
    combine()
