"""``hfsdk export``: any checkpoint of fsdp, megatron and LoRA runs (one stopped by SIGINT)
loads with transformers and reproduces the checkpoint's log-probs.

Real ``hfsdk run`` / ``hfsdk export`` subprocesses on the default task (in-process
workers, one device). Three references for "the checkpoint's log-probs": the
fsdp checkpoint's DCP files read independently of hfsdk (torch's
``dcp_to_torch_save`` into the base model); the ``actor_hf/`` the run itself
exported from its live weights at the step it saved (megatron, LoRA, SIGINT);
and, for LoRA, peft applying the exported adapter to the base model.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

pytestmark = [pytest.mark.slow, pytest.mark.heavy]

HFSDK = str(Path(sys.executable).parent / "hfsdk")
SMALL = [
    "trainer.total_steps=2",
    "trainer.save_every=1",
    "data.batch_size=4",
    "algorithm.n_samples_per_prompt=2",
    "actor.mini_batch_size=4",
    "actor.micro_batch_size=2",
]
TOL = 1e-5  # fp32 forward of the same weights, same ops: only summation order can differ


def _env(fault: str | None = None) -> dict[str, str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("RAY_ADDRESS", None)
    env.pop("HFSDK_FAULT_INJECT", None)
    if fault:
        env["HFSDK_FAULT_INJECT"] = fault
    return env


def _hfsdk(*args: str, fault: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [HFSDK, *args], env=_env(fault), capture_output=True, text=True, timeout=600
    )


def _train(run_dir: Path, *extra: str, fault: str | None = None) -> Path:
    done = _hfsdk("run", "--algo", "grpo", "--quiet", "--run-dir", str(run_dir), *SMALL, *extra,
                  fault=fault)  # fmt: skip
    if fault is None:
        assert done.returncode == 0, done.stderr[-3000:]
    return run_dir


def _export(run_dir: Path, out: Path, *extra: str) -> Path:
    done = _hfsdk("export", str(run_dir), "--out", str(out), *extra)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    return out


def _ids(model_dir: Path) -> torch.Tensor:
    """Token ids of a default-task text, through the exported directory's AutoTokenizer."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    ids = tokenizer("2 + 3 = 5 4 + 1 = 5 7 + 2 = 9")["input_ids"]
    assert len(ids) >= 8 and tokenizer.unk_token_id not in ids
    return torch.tensor([ids])


def _log_probs(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        logits = model(input_ids=ids).logits.float()
    return torch.log_softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None])[..., 0]


def _hf_log_probs(model_dir: Path, ids: torch.Tensor) -> torch.Tensor:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    return _log_probs(model.eval(), ids)


def _base_model_dir() -> Path:
    from hfsdk import default_task_assets

    return Path(default_task_assets().model_dir)


@pytest.fixture(scope="module")
def fsdp_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _train(tmp_path_factory.mktemp("fsdp") / "run")


def test_fsdp_export_reproduces_the_sharded_checkpoint(fsdp_run: Path, tmp_path: Path) -> None:
    """step_1 has no actor_hf (hf_export: end); its export equals the DCP files read by torch."""
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
    from transformers import AutoModelForCausalLM

    step = fsdp_run / "checkpoints" / "step_1"
    assert not (step / "actor_hf").exists()
    # (issue 42 #6) the run logged its info lines into its own log file.
    assert (
        "INFO hfsdk.core.trainer.trainer: checkpoint written to"
        in (fsdp_run / "hfsdk.log").read_text()
    )
    out = _export(fsdp_run, tmp_path / "out", "--step", "1")
    assert sorted(p.name for p in out.iterdir()) == ["actor"]  # not the frozen reference
    ids = _ids(out / "actor")
    exported = _hf_log_probs(out / "actor", ids)

    dcp_to_torch_save(str(step / "actor" / "actor_dcp"), str(tmp_path / "full.pt"))
    state = torch.load(tmp_path / "full.pt", weights_only=False)["model"]
    model = AutoModelForCausalLM.from_pretrained(str(_base_model_dir()), dtype=torch.float32)
    base = _log_probs(model.eval(), ids)
    model.load_state_dict(state, strict=True)
    from_checkpoint = _log_probs(model.eval(), ids)
    assert (exported - from_checkpoint).abs().max().item() <= TOL
    assert (exported - base).abs().max().item() > 1e-4  # the trained step, not the base model

    # The last step: the export equals what the run itself wrote from its live weights.
    last = _export(fsdp_run, tmp_path / "last", "--step", "2", "--role", "actor")
    assert (last / "config.json").is_file()  # one role asked for: --out is that role
    live = _hf_log_probs(fsdp_run / "checkpoints" / "step_2" / "actor_hf", ids)
    assert (_hf_log_probs(last, ids) - live).abs().max().item() <= TOL
    assert (live - exported).abs().max().item() > 1e-4


def test_export_refuses_bad_input_with_one_line(fsdp_run: Path, tmp_path: Path) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    for args, expected in [
        (["--step", "7"], "--step 7: "),
        (["--role", "critic"], "--role critic: the grpo run has no trained role"),
    ]:
        done = _hfsdk("export", str(fsdp_run), "--out", str(tmp_path / "new"), *args)
        assert done.returncode == 2 and expected in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
    done = _hfsdk("export", str(fsdp_run), "--out", str(tmp_path / "full"))
    assert done.returncode == 2 and "is not empty" in done.stderr
    done = _hfsdk("export", str(fsdp_run), "--out", "/proc/hfsdk-export")  # before: internal
    assert done.returncode == 2 and "--out '/proc/hfsdk-export' cannot be written" in done.stderr
    assert not (tmp_path / "new").exists()


def test_a_run_without_checkpoints_is_named_by_its_run_dir_argument(tmp_path: Path) -> None:
    """``hfsdk export`` takes RUN_DIR as an argument; the message asked for a --run-dir."""
    from hfsdk import HfsdkError
    from hfsdk_run_records.export import checkpoint_of

    with pytest.raises(HfsdkError, match=r"no complete checkpoint .*; pass the RUN_DIR of a run"):
        checkpoint_of(tmp_path, None)


def test_export_fills_an_empty_working_directory_and_never_merges_two(
    fsdp_run: Path, tmp_path: Path
) -> None:
    from hfsdk import HfsdkError
    from hfsdk_run_records.export import _publish

    (tmp_path / "here").mkdir()
    done = subprocess.run(
        [HFSDK, "export", str(fsdp_run), "--out", "."], cwd=tmp_path / "here", env=_env(None),
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]  # before: "'.' has an empty name"
    assert sorted(p.name for p in (tmp_path / "here").iterdir()) == ["actor"]
    assert not list(tmp_path.glob(".*tmp-export-*"))
    # Files put into the working directory one by one could be cut short by a kill: refused.
    (tmp_path / "again").mkdir()
    done = subprocess.run(
        [HFSDK, "export", str(fsdp_run), "--out", ".", "--role", "actor"], cwd=tmp_path / "again",
        env=_env(None), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 2 and "is the working directory" in done.stderr, done.stderr
    assert not any((tmp_path / "again").iterdir())
    # Another export finished first: this one's files are refused, not mixed in.
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "actor").mkdir()
    with pytest.raises(HfsdkError, match="was written meanwhile"):
        _publish(tmp_path / "mine", tmp_path / "here", one_entry=False)
    with pytest.raises(HfsdkError, match="was written meanwhile"):
        _publish(tmp_path / "mine", tmp_path / "here", one_entry=True)


def test_sigterm_removes_the_unfinished_export_and_a_rerun_writes_it(
    fsdp_run: Path, tmp_path: Path
) -> None:
    """SIGTERM (a plain ``kill``) mid-export into an existing empty --out: nothing is left in
    or beside it, and the same command then succeeds, also past a SIGKILLed export's folders.
    Before: SIGTERM skipped the cleanup, and --out held ``.tmp-export-<pid>/actor``."""
    out = tmp_path / "out"
    out.mkdir()
    export = subprocess.Popen(
        [HFSDK, "export", str(fsdp_run), "--out", str(out)], env=_env(None),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob("**/.*tmp-export-*")) and export.poll() is None:
        assert time.monotonic() < deadline, "no staging folder appeared"
        time.sleep(0.01)
    export.send_signal(signal.SIGTERM)
    _, stderr = export.communicate(timeout=120)
    assert export.returncode == 143, stderr[-2000:]
    assert "Traceback" not in stderr and "stopped by SIGTERM" in stderr, stderr[-2000:]
    assert not list(tmp_path.glob("**/*tmp-export-*")), list(tmp_path.glob("**/*"))
    assert not any(out.iterdir())
    # A SIGKILLed export's folders (of a process that is gone) are neither content nor kept.
    dead = subprocess.Popen([sys.executable, "-c", ""])
    dead.wait()
    (tmp_path / f".out.tmp-export-{dead.pid}" / "actor").mkdir(parents=True)
    (out / f".tmp-export-{dead.pid}").mkdir()  # where earlier versions wrote it
    _export(fsdp_run, out)
    assert sorted(p.name for p in out.iterdir()) == ["actor"]
    assert not list(tmp_path.glob("**/*tmp-export-*"))


def test_megatron_export_reproduces_the_checkpoint(tmp_path: Path) -> None:
    run = _train(tmp_path / "run", "actor.backend=megatron", "reference.backend=megatron")
    first = _export(run, tmp_path / "s1", "--step", "1")
    last = _export(run, tmp_path / "s2")  # the newest: step 2
    ids = _ids(last / "actor")
    live = _hf_log_probs(run / "checkpoints" / "step_2" / "actor_hf", ids)
    assert (_hf_log_probs(last / "actor", ids) - live).abs().max().item() <= TOL
    assert (_hf_log_probs(first / "actor", ids) - live).abs().max().item() > 1e-4


def test_lora_export_writes_adapter_and_merged_model(tmp_path: Path) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    # The run merges too: --no-lora-merged below must still give the adapter alone.
    run = _train(
        tmp_path / "run",
        "actor.lora.rank=4",
        "actor.lora.alpha=16",
        "actor.lora.export_merged=true",
    )
    out = _export(run, tmp_path / "out")
    adapter, merged = out / "actor", out / "actor" / "merged"
    assert (adapter / "adapter_config.json").is_file()
    ids = _ids(merged)
    base = AutoModelForCausalLM.from_pretrained(str(_base_model_dir()), dtype=torch.float32)
    plain = _log_probs(base.eval(), ids)
    with_adapter = _log_probs(PeftModel.from_pretrained(base, str(adapter)).eval(), ids)
    assert (_hf_log_probs(merged, ids) - with_adapter).abs().max().item() <= TOL
    assert (with_adapter - plain).abs().max().item() > 1e-5  # the adapter changed something
    # The run's own export of its live adapter at step 2 gives the same log-probs.
    live = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(str(_base_model_dir()), dtype=torch.float32),
        str(run / "checkpoints" / "step_2" / "actor_hf"),
    )
    assert (_log_probs(live.eval(), ids) - with_adapter).abs().max().item() <= TOL
    no_merge = _export(run, tmp_path / "adapter_only", "--no-lora-merged")
    assert not (no_merge / "actor" / "merged").exists()


@pytest.mark.parametrize("save_every", [0, 1])
def test_a_checkpoint_written_on_sigint_exports(tmp_path: Path, save_every: int) -> None:
    """Ctrl-C at step 2 of 4: step_2 holds actor_hf (hf_export: end) and exports; also when
    step 2 was saved anyway (save_every=1) before the stop was seen."""
    run = _train(tmp_path / "run", "trainer.total_steps=4", f"trainer.save_every={save_every}",
                 fault="sigint:2")  # fmt: skip
    steps = sorted(p.name for p in (run / "checkpoints").iterdir() if p.name.startswith("step_"))
    assert steps == (["step_2"] if save_every == 0 else ["step_1", "step_2"])
    assert not (run / "checkpoints" / "step_1" / "actor_hf").exists()
    live = run / "checkpoints" / "step_2" / "actor_hf"
    assert (live / "model.safetensors").is_file()
    out = _export(run, tmp_path / "out")
    ids = _ids(out / "actor")
    assert (_hf_log_probs(out / "actor", ids) - _hf_log_probs(live, ids)).abs().max().item() <= TOL


def test_ppo_exports_the_critic_with_its_value_head(tmp_path: Path) -> None:
    """Every trained role: the critic loads with its head's auto class and holds exactly the
    checkpoint's weights (its DCP files read by torch)."""
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
    from transformers import AutoModelForTokenClassification

    run = tmp_path / "run"
    done = _hfsdk("run", "--algo", "ppo", "--quiet", "--run-dir", str(run),
                  "trainer.total_steps=1", "data.batch_size=4", "actor.mini_batch_size=4",
                  "critic.mini_batch_size=4")  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = _export(run, tmp_path / "out")
    assert sorted(p.name for p in out.iterdir()) == ["actor", "critic"]
    critic = AutoModelForTokenClassification.from_pretrained(str(out / "critic"))
    step = run / "checkpoints" / "step_1" / "critic" / "critic_dcp"
    dcp_to_torch_save(str(step), str(tmp_path / "critic.pt"))
    saved = torch.load(tmp_path / "critic.pt", weights_only=False)["model"]
    exported = critic.state_dict()
    assert saved.keys() == exported.keys()
    assert all(torch.equal(saved[k].float(), exported[k].float()) for k in saved)
    _ids(out / "critic")  # its tokenizer loads with AutoTokenizer too
