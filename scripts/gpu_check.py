"""The GPU check: hfsdk's CUDA path in one prepared run, one table, non-zero exit on a mismatch.

    scripts/gpu_check.sh --device cuda --out DIR          # on the GPU machine (wheels carried)
    python scripts/gpu_check.py --device cpu --tiny --out DIR   # the small mode, here

Parts (docs/benchmarks.md, "GPU check", says more):

1. GRPO with the fsdp actor and reference (bfloat16 on CUDA, float32 in the
   tiny mode) and the hfsdk decoder on a random Llama of Qwen2.5-0.5B's shape
   (``gpu_check_task.py``): 16 prompts x 8 samples x 256 tokens, 5 steps;
   tokens/s, mean seconds per stage (the run's ``metrics.jsonl``, steps 2+)
   and peak GPU memory.
2. The same with the megatron-core actor and reference at tp 1; on CUDA the
   layer spec keeps megatron-core's own ``DotProductAttention`` (the CPU
   path swaps in an SDPA module), and the check says which one was built.
   Skipped, with a line, when megatron-core is not importable.
3. TRL's ``GRPOTrainer`` on the same model, prompts and settings (bf16 mixed
   precision, HF generate), through ``benchmarks/vs_trl.py``'s functions,
   for the hfsdk/TRL ratio. Skipped, with a line, when TRL is not importable.
4. Exact resume without a kill, per backend: 2 steps, then 2 more from the
   checkpoint, against 4 straight steps (max abs difference of the exported
   weights; the weights must also have moved between step 2 and step 4).
   CUDA kernels run with ``torch.use_deterministic_algorithms`` here, so a
   difference means state that was not saved (such as the CUDA RNG).
5. Greedy equality against HF ``generate`` in float32 (strict) of every
   decoder path: the hfsdk decoder and ``decoder: transformers`` on the fsdp
   actor, and the megatron actor's hybrid rollout; the bfloat16 agreement
   with ``generate`` is reported too (bf16 rounding may flip near ties, so it
   does not fail the check).

Every run uses the in-process executor (``trainer.executor=local``; no Ray)
and the trainer's Python entry point (``run_training``). Each backend's runs
happen in a child process of their own (megatron-core's parallel state is
global to a process; peak memory is per process). The table is printed and
written to ``DIR/gpu_check.json`` and ``DIR/gpu_check.md``; the children's
logs go to ``DIR/logs``. Model directories and checkpoints stay in
``--workdir`` (default: a temporary directory, removed at the end).

When the plugins are on ``PYTHONPATH`` but not installed (the GPU machine),
their entry points are written into a ``.dist-info`` folder under the work
directory first, so hfsdk finds them as if installed.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "benchmarks")]

import gpu_check_task as task  # noqa: E402
import vs_trl  # noqa: E402

JOBS = ("fsdp", "megatron", "trl")
"""Child processes, in the order they run (the most important first)."""
JOB_SHARE = {"fsdp": 0.45, "megatron": 0.65, "trl": 1.0}
"""Share of the time left that each job may use before it is stopped."""
RESUME_TOLERANCE = 1e-6
"""Max abs difference of float32 weights between 2 + 2 and 4 steps (deterministic kernels)."""
CHILD_ENV = {
    **vs_trl.CHILD_ENV,
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_VERBOSITY": "error",
    # cuBLAS is deterministic only with a fixed workspace (set before CUDA starts).
    "CUBLAS_WORKSPACE_CONFIG": ":4096:8",
}


@attrs.frozen(kw_only=True)
class Profile:
    """Sizes of one mode: the models, the GRPO runs and the greedy check."""

    name: str
    model: dict[str, Any]
    resume_model: dict[str, Any]
    grpo: vs_trl.Settings
    """The throughput runs (parts 1-3); the same settings drive TRL."""
    resume: vs_trl.Settings
    """The exact-resume runs (part 4): ``steps`` straight, against half + half."""
    greedy_prompts: int
    greedy_width: int
    time_limit_s: float


def profile(device: str, tiny: bool, dtype: str | None = None) -> Profile:
    """The full check (``--device cuda``) or the small mode (``--tiny``).

    ``dtype`` overrides the training dtype (the tiny mode's default is float32:
    bfloat16 is emulated, and slow, on many CPUs; the full check's is bfloat16).
    """
    if tiny:
        dtype = dtype or "float32"
        small = vs_trl.Settings(
            steps=2, batch_size=4, group_size=4, max_response_length=16, lr=1e-3, dtype=dtype,
            device=device,
        )  # fmt: skip
        return Profile(
            name="tiny",
            model=task.TINY_SHAPE,
            resume_model=task.TINY_SHAPE,
            grpo=small,
            resume=attrs.evolve(small, steps=2, max_response_length=8),
            greedy_prompts=4,
            greedy_width=8,
            time_limit_s=600.0,
        )
    grpo = vs_trl.Settings(
        steps=5, batch_size=16, group_size=8, max_response_length=256, micro_batch_size=16,
        lr=1e-5, dtype=dtype or "bfloat16", device=device,
    )  # fmt: skip
    return Profile(
        name="full",
        model=task.QWEN25_05B_SHAPE,
        resume_model=task.RESUME_SHAPE,
        grpo=grpo,
        # lr 1e-4: Adam's first steps must move bf16-exported weights visibly.
        resume=attrs.evolve(
            grpo, steps=4, batch_size=4, group_size=4, max_response_length=32, lr=1e-4
        ),
        greedy_prompts=16,
        greedy_width=32,
        time_limit_s=500.0,
    )


# -- rows of the table -----------------------------------------------------------------


def row(part: str, check: str, status: str, result: str, **numbers: Any) -> dict[str, Any]:
    """One table row; ``status`` is pass, fail, skip or info (only fail fails the check)."""
    return {"part": part, "check": check, "status": status, "result": result, "numbers": numbers}


class Rows(list):
    """A job's rows, written to ``path`` after every new row (a killed job keeps its rows)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.started = time.perf_counter()

    def append(self, item: dict[str, Any]) -> None:
        """Add a row and save."""
        super().append(item)
        self.save()

    def save(self, done: bool = False) -> None:
        """Write the rows so far (atomically); ``done`` marks a job that finished."""
        body = {"rows": list(self), "done": done, "wall_s": time.perf_counter() - self.started}
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(body, indent=2, default=str))
        tmp.rename(self.path)


@contextlib.contextmanager
def guarded(rows: list[dict[str, Any]], part: str, check: str) -> Iterator[None]:
    """Turn an exception inside the block into a failing row (the traceback goes to the log)."""
    try:
        yield
    except Exception as exc:
        traceback.print_exc()
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        rows.append(row(part, check, "fail", f"{type(exc).__name__}: {first}"[:300]))


# -- hfsdk runs --------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Assets:
    """Paths the jobs share (built once by the parent)."""

    model_dir: Path
    resume_model_dir: Path
    train_jsonl: Path

    def to_dict(self) -> dict[str, str]:
        """JSON-friendly paths."""
        return {k: str(v) for k, v in attrs.asdict(self).items()}

    def untied(self, prof: Profile) -> Assets:
        """The same shapes with an untied output layer (the megatron job's, see there)."""

        def copy(path: Path, shape: dict[str, Any], seed: int) -> Path:
            untied = {**shape, "tie_word_embeddings": False}
            target = path.with_name(path.name + "_untied")
            return task.build_model(target, untied, self.train_jsonl, seed=seed)

        model = copy(self.model_dir, prof.model, 0)
        resume = (
            model
            if self.resume_model_dir == self.model_dir
            else copy(self.resume_model_dir, prof.resume_model, 1)
        )
        return Assets(model_dir=model, resume_model_dir=resume, train_jsonl=self.train_jsonl)


def hfsdk_overrides(
    s: vs_trl.Settings, model_dir: Path, train_jsonl: Path, backend: str
) -> list[str]:
    """``vs_trl``'s matched settings plus this check's model, data, reward, backend, device."""
    reward = f"{REPO / 'scripts' / 'gpu_check_task.py'}:odd_length_share"
    base = vs_trl.hfsdk_overrides(s)
    if backend == "megatron":  # an fsdp-only key; and megatron trains in float32 (refused else)
        drop = ("actor.gradient_checkpointing=", "actor.dtype=")
        base = [o for o in base if not o.startswith(drop)]
    extra = [
        f"actor.model_path={model_dir}",
        f"reference.model_path={model_dir}",
        f"data.train_files=[{train_jsonl}]",
        f"reward.functions=[{{name: {reward}}}]",
        "trainer.executor=local",
        "trainer.loggers=[jsonl]",
        "rollout.decoder=hfsdk",
        f"actor.backend={backend}",
        f"reference.backend={backend}",
        f"actor.device={s.device}",
        f"reference.device={s.device}",
    ]
    if backend == "megatron":
        extra += ["actor.parallel.tp=1", "reference.parallel.tp=1"]
    return [*base, *extra]


def train(
    s: vs_trl.Settings, model_dir: Path, train_jsonl: Path, backend: str, run_dir: Path
) -> list[dict[str, Any]]:
    """One GRPO run in this process; the rows of its ``metrics.jsonl``."""
    from hfsdk.core.config import load_run_config
    from hfsdk.core.trainer.trainer import run_training

    config = load_run_config("grpo", None, hfsdk_overrides(s, model_dir, train_jsonl, backend))
    try:
        run_training(config, run_dir, quiet=True)
    finally:
        release(backend)
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def release(backend: str) -> None:
    """Free what a finished in-process run leaves behind, so the next run starts clean.

    megatron-core's parallel state is global to the process and outlives the
    run's process group; it is destroyed here so the next run builds its own.
    """
    if backend == "megatron":
        from megatron.core import parallel_state as mpu

        if mpu.model_parallel_is_initialized():
            mpu.destroy_model_parallel()
    gc.collect()
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def throughput(metrics: list[dict[str, Any]]) -> dict[str, Any]:
    """Tokens/s over all steps and steps 2+, and mean seconds per stage over steps 2+."""
    steps = [
        {"step_s": m["timing/step_s"],
         "tokens": m["perf/throughput_tokens_per_s"] * m["timing/step_s"]}
        for m in metrics
    ]  # fmt: skip
    later = metrics[1:] or metrics
    later_steps = steps[1:] or steps
    stages = sorted({k for m in later for k in m if k.startswith("timing/")})
    return {
        "steps": len(metrics),
        "tokens_per_s": sum(x["tokens"] for x in steps) / sum(x["step_s"] for x in steps),
        "steady_tokens_per_s": sum(x["tokens"] for x in later_steps)
        / sum(x["step_s"] for x in later_steps),
        "tokens_per_step": statistics.mean(x["tokens"] for x in steps),
        "stages_s": {
            k.removeprefix("timing/").removesuffix("_s"): statistics.mean(
                m.get(k, 0.0) for m in later
            )
            for k in stages
        },
        "reward_first": metrics[0]["reward/mean"],
        "reward_last": metrics[-1]["reward/mean"],
    }


def peak_memory_reset() -> None:
    """Start counting peak GPU memory from now (nothing on CPU)."""
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()


def peak_memory_gib() -> float | None:
    """Peak GPU memory allocated since the last reset (``None`` without CUDA)."""
    import torch

    if not torch.cuda.is_available():
        return None
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() / 2**30


def throughput_text(t: dict[str, Any], peak: float | None) -> str:
    """``tokens/s ...; stage s/step ...; peak ...`` for the table."""
    stages = ", ".join(f"{k} {v:.2f}" for k, v in t["stages_s"].items() if k in STAGES_SHOWN)
    memory = f"; peak GPU {peak:.1f} GiB" if peak is not None else ""
    return (
        f"{t['steady_tokens_per_s']:.0f} tokens/s (steps 2+; all {t['tokens_per_s']:.0f}), "
        f"{t['tokens_per_step']:.0f} tokens/step; s/step: {stages}{memory}"
    )


STAGES_SHOWN = ("step", "generation", "old_log_prob", "ref_log_prob", "update_actor", "reshard")


def grpo_part(
    rows: list[dict[str, Any]], prof: Profile, assets: Assets, backend: str, workdir: Path
) -> None:
    """Part 1 (fsdp) or 2 (megatron): the throughput run."""
    part = "1" if backend == "fsdp" else "2"
    check = f"GRPO {backend} ({prof.grpo.dtype}, hfsdk decoder)"
    with guarded(rows, part, check):
        peak_memory_reset()
        run_dir = workdir / f"grpo_{backend}"
        metrics = train(prof.grpo, assets.model_dir, assets.train_jsonl, backend, run_dir)
        peak = peak_memory_gib()
        shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)  # GBs at full size
        t = throughput(metrics)
        ok = t["steps"] == prof.grpo.steps and all(
            math.isfinite(m["actor/loss"]) and m["perf/throughput_tokens_per_s"] > 0
            for m in metrics
        )
        status = "pass" if ok else "fail"
        rows.append(row(part, check, status, throughput_text(t, peak), peak_gib=peak, **t))


def resume_part(
    rows: list[dict[str, Any]], prof: Profile, assets: Assets, backend: str, workdir: Path
) -> None:
    """Part 4: ``steps`` straight against half, then the rest from the checkpoint."""
    import torch
    from safetensors.torch import load_file

    s = prof.resume
    half = s.steps // 2
    check = f"resume {half}+{s.steps - half} = {s.steps} steps ({backend})"

    def run(name: str, steps: int) -> list[dict[str, Any]]:
        return train(
            attrs.evolve(s, steps=steps), assets.resume_model_dir, assets.train_jsonl, backend,
            workdir / name,
        )  # fmt: skip

    def weights(name: str, step: int) -> dict[str, torch.Tensor]:
        path = workdir / name / "checkpoints" / f"step_{step}" / "actor_hf" / "model.safetensors"
        return {k: v.float() for k, v in load_file(str(path)).items()}

    def max_diff(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
        if a.keys() != b.keys():
            raise RuntimeError(f"exported weights differ in names: {sorted(a.keys() ^ b.keys())}")
        return max((a[k] - b[k]).abs().max().item() for k in a)

    with guarded(rows, "4", check):
        torch.use_deterministic_algorithms(True, warn_only=True)
        try:
            straight = run(f"resume_{backend}_straight", s.steps)
            run(f"resume_{backend}_split", half)
            resumed = run(f"resume_{backend}_split", s.steps)
            final = weights(f"resume_{backend}_split", s.steps)
            diff = max_diff(weights(f"resume_{backend}_straight", s.steps), final)
            moved = max_diff(weights(f"resume_{backend}_split", half), final)
            noise = None
            if diff > RESUME_TOLERANCE:  # is it the resume, or run-to-run noise of the kernels?
                run(f"resume_{backend}_again", s.steps)
                noise = max_diff(
                    weights(f"resume_{backend}_straight", s.steps),
                    weights(f"resume_{backend}_again", s.steps),
                )
        finally:
            torch.use_deterministic_algorithms(False)
        rewards_equal = [a["reward/mean"] for a in straight] == [b["reward/mean"] for b in resumed]
        ok = diff <= RESUME_TOLERANCE and moved > 0 and rewards_equal
        text = (
            f"weights max |diff| {diff:.2e} (tolerance {RESUME_TOLERANCE:.0e}); "
            f"moved {moved:.2e} from step {half} to {s.steps}; "
            f"per-step rewards {'equal' if rewards_equal else 'DIFFER'}"
        )
        if noise is not None:
            text += f"; two straight runs differ by {noise:.2e}"
        rows.append(
            row("4", check, "pass" if ok else "fail", text, max_diff=diff, moved=moved,
                rewards_equal=rewards_equal, straight_runs_diff=noise)
        )  # fmt: skip
        for name in ("straight", "split", "again"):
            shutil.rmtree(workdir / f"resume_{backend}_{name}", ignore_errors=True)


# -- greedy equality -----------------------------------------------------------------


def greedy_prompts(prof: Profile, assets: Assets, device: str) -> tuple[Any, Any, dict[str, Any]]:
    """(tokenizer, prompt batch, prompt tensors on ``device``): prompts of several widths."""
    from transformers import PreTrainedTokenizerFast

    from hfsdk import Batch

    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(assets.model_dir))
    tokenizer.padding_side = "left"
    base = task.prompt_texts(assets.train_jsonl, prof.greedy_prompts)
    # Repeating some prompts gives rows of different widths, so left padding is exercised.
    texts = [" ".join([text] * (1 + i % 3)) for i, text in enumerate(base)]
    encoded = tokenizer(texts, return_tensors="pt", padding=True)
    batch = Batch.from_dict(
        tensors={"input_ids": encoded.input_ids, "attention_mask": encoded.attention_mask},
        non_tensors={"raw_prompt": texts, "uid": [f"p{i}" for i in range(len(texts))]},
    )
    on_device = {k: encoded[k].to(device) for k in ("input_ids", "attention_mask")}
    return tokenizer, batch, on_device


def reference_greedy(
    prof: Profile, assets: Assets, device: str, dtype: str, prompts: dict[str, Any], tokenizer: Any
) -> Any:
    """HF ``generate``'s greedy responses (``greedy_width`` columns, padded after EOS)."""
    import torch
    from transformers import AutoModelForCausalLM

    from hfsdk_testing import hf_greedy_responses

    model = AutoModelForCausalLM.from_pretrained(
        str(assets.model_dir), dtype=getattr(torch, dtype)
    ).to(device)
    model.eval()
    out = hf_greedy_responses(
        model, prompts["input_ids"], prompts["attention_mask"], width=prof.greedy_width,
        eos=tokenizer.eos_token_id, pad=tokenizer.pad_token_id,
    )  # fmt: skip
    del model
    release("fsdp")
    return out.cpu()


def compare_greedy(
    rows: list[dict[str, Any]], check: str, mine: Any, reference: Any, *, strict: bool
) -> None:
    """A row: token agreement with ``generate`` (strict: every token must match)."""
    mine = mine.cpu()
    same = (mine == reference).float().mean().item()
    exact = bool(same == 1.0)
    mismatched_rows = [i for i in range(len(mine)) if not bool((mine[i] == reference[i]).all())]
    text = f"{same:.1%} of {mine.numel()} tokens equal to generate"
    if mismatched_rows:
        first = mismatched_rows[0]
        col = int((mine[first] != reference[first]).nonzero()[0, 0])
        text += f"; first difference: row {first}, token {col}"
    status = ("pass" if exact else "fail") if strict else "info"
    rows.append(row("5", check, status, text, agreement=same, mismatched_rows=mismatched_rows))


def fsdp_greedy_part(
    rows: list[dict[str, Any]], prof: Profile, assets: Assets, device: str
) -> None:
    """Part 5 for the fsdp actor: the hfsdk decoder and ``decoder: transformers``."""
    from hfsdk_backend_common.rollout.hf_rollout import HFRollout
    from hfsdk_backend_common.rollout_config import HFRolloutConfig
    from hfsdk_backend_fsdp.actor import ActorEngine
    from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig

    tokenizer, batch, prompts = greedy_prompts(prof, assets, device)
    dtypes = ("float32", "bfloat16") if device == "cuda" else ("float32",)
    for dtype in dtypes:
        strict = dtype == "float32"
        with guarded(rows, "5", f"greedy fsdp ({dtype}) vs generate"):
            reference = reference_greedy(prof, assets, device, dtype, prompts, tokenizer)
            actor = ActorEngine(
                FSDPRoleConfig(model_path=str(assets.model_dir), dtype=dtype, device=device),
                role="actor",
            )
            for decoder in ("hfsdk", "transformers") if strict else ("hfsdk",):
                config = HFRolloutConfig(max_response_length=prof.greedy_width, decoder=decoder)
                rollout = HFRollout.build(config, actor)
                out = rollout.generate_sequences(batch, greedy=True)
                name = f"greedy fsdp {decoder} decoder ({dtype}) vs generate"
                compare_greedy(rows, name, out["responses"], reference, strict=strict)
            del actor
            release("fsdp")


@contextlib.contextmanager
def one_rank_group(device: str) -> Iterator[None]:
    """A one-rank process group like the in-process trainer's (NCCL beside gloo on CUDA).

    Without it the megatron engine would make a gloo-only group, which is not
    what training uses on a GPU.
    """
    import torch.distributed as dist

    store = dist.TCPStore("127.0.0.1", 0, 1, is_master=True)
    backend = "cpu:gloo,cuda:nccl" if device == "cuda" else "gloo"
    dist.init_process_group(backend=backend, store=store, rank=0, world_size=1)
    try:
        yield
    finally:
        release("megatron")
        dist.destroy_process_group()


def megatron_greedy_part(
    rows: list[dict[str, Any]], prof: Profile, assets: Assets, device: str
) -> None:
    """Part 5 for the megatron actor (hybrid rollout); also which core attention was built."""
    from hfsdk_backend_common.rollout.hf_rollout import HFRollout
    from hfsdk_backend_common.rollout_config import HFRolloutConfig
    from hfsdk_backend_megatron.engine import MegatronEngine
    from hfsdk_backend_megatron.megatron_config import MegatronRoleConfig

    tokenizer, batch, prompts = greedy_prompts(prof, assets, device)
    with (
        guarded(rows, "5", "greedy megatron hybrid rollout (float32) vs generate"),
        one_rank_group(device),
    ):
        reference = reference_greedy(prof, assets, device, "float32", prompts, tokenizer)
        engine = MegatronEngine(
            MegatronRoleConfig(model_path=str(assets.model_dir), dtype="float32", device=device),
            role="actor",
            kind="actor",
        )
        attention = sorted(
            {
                type(m).__name__
                for n, m in engine.model.named_modules()
                if n.endswith("core_attention")
            }
        )
        expected = "DotProductAttention" if device == "cuda" else "SDPACoreAttention"
        rows.append(
            row("2", "megatron core attention", "pass" if attention == [expected] else "fail",
                f"built {', '.join(attention)} (expected {expected} on {device})",
                attention=attention)
        )  # fmt: skip
        config = HFRolloutConfig(max_response_length=prof.greedy_width)
        if engine.generation_shards(config) is None:
            raise RuntimeError("the megatron actor offers no generation shards for this model")
        rollout = HFRollout.build(config, engine)  # the 3D-HybridEngine's shard path
        out = rollout.generate_sequences(batch, greedy=True)
        compare_greedy(
            rows, "greedy megatron hybrid rollout (float32) vs generate", out["responses"],
            reference, strict=True,
        )  # fmt: skip
        del engine, rollout
        release("megatron")


# -- jobs (child processes) ------------------------------------------------------------------


def megatron_missing() -> str | None:
    """Why megatron-core cannot be used here (``None``: it can)."""
    try:
        import megatron.core  # noqa: F401
    except ImportError as exc:
        return f"megatron-core is not importable ({exc})"
    return None


def trl_missing() -> str | None:
    """Why TRL cannot be used here (``None``: it can)."""
    try:
        import trl  # noqa: F401
    except ImportError as exc:
        return f"TRL is not importable ({exc})"
    return None


def fsdp_job(prof: Profile, assets: Assets, device: str, workdir: Path, rows: Rows) -> None:
    """Parts 1, 4 and 5 for the fsdp backend."""
    grpo_part(rows, prof, assets, "fsdp", workdir)
    resume_part(rows, prof, assets, "fsdp", workdir)
    fsdp_greedy_part(rows, prof, assets, device)


def megatron_job(prof: Profile, assets: Assets, device: str, workdir: Path, rows: Rows) -> None:
    """Parts 2, 4 and 5 for the megatron backend (skipped rows without megatron-core).

    The megatron actor's generation shards cover untied output layers only
    (``hybrid_shards.hybrid_supported``; tied models decode through the actor's
    HF weights instead), so to check the shard path this job trains and decodes
    copies of the models with ``tie_word_embeddings: false`` (the same shape
    plus a separate output matrix) and reports what the tied model gets.
    """
    missing = megatron_missing()
    if missing:
        for part, check in (("2", "GRPO megatron"), ("4", "resume (megatron)"),
                            ("5", "greedy megatron hybrid rollout")):  # fmt: skip
            rows.append(row(part, check, "skip", missing))
        return
    from types import SimpleNamespace

    from hfsdk_backend_megatron.arch import read_shape
    from hfsdk_backend_megatron.hybrid_shards import hybrid_supported

    why_not = hybrid_supported(SimpleNamespace(shape=read_shape(assets.model_dir)))
    rows.append(
        row("2", "megatron generation shards, tied embeddings", "info",
            f"not offered ({why_not}; the hf rollout decodes from the actor's HF weights); "
            "this job uses an untied copy to check the shard path" if why_not else "supported")
    )  # fmt: skip
    assets = assets.untied(prof)
    grpo_part(rows, prof, assets, "megatron", workdir)
    resume_part(rows, prof, assets, "megatron", workdir)
    megatron_greedy_part(rows, prof, assets, device)


def trl_job(prof: Profile, assets: Assets, device: str, workdir: Path, rows: Rows) -> None:
    """Part 3: TRL's GRPOTrainer on the same model and settings."""
    missing = trl_missing()
    if missing:
        rows.append(row("3", "TRL GRPOTrainer", "skip", missing))
        return
    with guarded(rows, "3", f"TRL GRPOTrainer ({prof.grpo.dtype}, HF generate)"):
        peak_memory_reset()
        result = vs_trl.run_trl(
            prof.grpo, workdir / "trl", str(assets.model_dir), str(assets.train_jsonl),
            reward_funcs=[task.odd_length_share],
        )  # fmt: skip
        peak = peak_memory_gib()
        steps = result["steps"]
        later = steps[1:] or steps
        numbers = {
            "steps": len(steps),
            "tokens_per_s": sum(x["tokens"] for x in steps) / sum(x["step_s"] for x in steps),
            "steady_tokens_per_s": sum(x["tokens"] for x in later)
            / sum(x["step_s"] for x in later),
            "tokens_per_step": statistics.mean(x["tokens"] for x in steps),
            "step_s": statistics.mean(x["step_s"] for x in later),
            "peak_gib": peak,
            "versions": result["versions"],
        }
        memory = f"; peak GPU {peak:.1f} GiB" if peak is not None else ""
        text = (
            f"{numbers['steady_tokens_per_s']:.0f} tokens/s (steps 2+; all "
            f"{numbers['tokens_per_s']:.0f}), {numbers['tokens_per_step']:.0f} tokens/step; "
            f"{numbers['step_s']:.2f} s/step{memory}"
        )
        ok = len(steps) == prof.grpo.steps
        rows.append(row("3", f"TRL GRPOTrainer ({prof.grpo.dtype}, HF generate)",
                        "pass" if ok else "fail", text, **numbers))  # fmt: skip


JOB_FUNCTIONS: dict[str, Callable[..., None]] = {
    "fsdp": fsdp_job,
    "megatron": megatron_job,
    "trl": trl_job,
}


def child_main(args: argparse.Namespace) -> None:
    """Run one job and write its rows to ``<workdir>/job_<name>.json``."""
    prof = profile(args.device, args.tiny, args.dtype)
    spec = json.loads((args.workdir / "assets.json").read_text())
    assets = Assets(**{k: Path(v) for k, v in spec.items()})
    rows = Rows(args.workdir / f"job_{args.job}.json")
    JOB_FUNCTIONS[args.job](prof, assets, args.device, args.workdir / args.job, rows)
    rows.save(done=True)


# -- the parent ------------------------------------------------------------------------------


def ensure_tree_plugins(site: Path) -> list[str]:
    """Make the tree's plugins discoverable when they are importable but not installed.

    hfsdk finds plugins through ``hfsdk`` entry points. On a machine where the
    tree is used through ``PYTHONPATH`` (nothing installed), the entry points
    of ``plugins/*/pyproject.toml`` are written into a ``.dist-info`` folder
    in ``site``, which joins ``sys.path`` and the children's ``PYTHONPATH``.
    Returns the names written (empty when all were found).
    """
    import importlib
    from importlib import metadata

    found = {ep.name for ep in metadata.entry_points(group="hfsdk")}
    wanted: dict[str, str] = {}
    for pyproject in sorted((REPO / "plugins").glob("*/pyproject.toml")):
        project = tomllib.loads(pyproject.read_text()).get("project", {})
        wanted.update(project.get("entry-points", {}).get("hfsdk", {}))
    missing = {name: target for name, target in wanted.items() if name not in found}
    if not missing:
        return []
    info = site / "hfsdk_tree_plugins-0.0.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: hfsdk-tree-plugins\nVersion: 0.0.0\n"
    )
    lines = ["[hfsdk]", *(f"{name} = {target}" for name, target in sorted(missing.items()))]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    sys.path.insert(0, str(site))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p
    )
    importlib.invalidate_caches()
    return sorted(missing)


def build_assets(prof: Profile, workdir: Path) -> Assets:
    """The models and prompts every job uses (built once, in the parent)."""
    train_jsonl = task.train_prompts(workdir / "data")
    model = task.build_model(workdir / "model", prof.model, train_jsonl)
    resume = (
        model
        if prof.resume_model == prof.model
        else task.build_model(workdir / "resume_model", prof.resume_model, train_jsonl, seed=1)
    )
    assets = Assets(model_dir=model, resume_model_dir=resume, train_jsonl=train_jsonl)
    (workdir / "assets.json").write_text(json.dumps(assets.to_dict()))
    return assets


def run_job(name: str, args: argparse.Namespace, workdir: Path, out: Path, timeout: float) -> dict:
    """One job in a child process; its rows, or failing rows when it crashed or ran too long."""
    log = out / "logs" / f"{name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable, str(Path(__file__).resolve()), "--job", name, "--device", args.device,
        "--workdir", str(workdir), "--out", str(out), *(["--tiny"] if args.tiny else []),
        *(["--dtype", args.dtype] if args.dtype else []),
    ]  # fmt: skip
    # A CPU run keeps off a GPU the machine may have (in-process workers take CUDA if seen).
    hidden_gpus = {"CUDA_VISIBLE_DEVICES": ""} if args.device == "cpu" else {}
    started = time.perf_counter()
    print(f"[{name}] running (limit {timeout:.0f} s) ...", flush=True)
    with log.open("w") as sink:
        try:
            done = subprocess.run(
                command, stdout=sink, stderr=subprocess.STDOUT, timeout=timeout, cwd=REPO,
                env={**os.environ, **CHILD_ENV, **hidden_gpus},
            )  # fmt: skip
            code: int | None = done.returncode
        except subprocess.TimeoutExpired:
            code = None
    wall = time.perf_counter() - started
    result_path = workdir / f"job_{name}.json"
    result = json.loads(result_path.read_text()) if result_path.exists() else {"rows": []}
    if code != 0 or not result.get("done"):
        # The rows it finished stay; the crash or time-out is one more failing row.
        why = f"ran past {timeout:.0f} s" if code is None else f"exited with {code}"
        tail = " | ".join(log.read_text(errors="replace").strip().splitlines()[-3:])[-300:]
        result["rows"].append(row("-", f"{name} job", "fail", f"the child {why}; {tail}"))
    result["wall_s"] = wall
    print(f"[{name}] done in {wall:.0f} s", flush=True)
    return result


def ratio_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """hfsdk (each backend) / TRL tokens/s over steps 2+, where both ran."""

    def steady(prefix: str) -> float | None:
        hit = next(
            (r for r in rows if r["check"].startswith(prefix) and r["status"] == "pass"), None
        )
        return hit["numbers"].get("steady_tokens_per_s") if hit else None

    trl = steady("TRL GRPOTrainer")
    out = []
    for backend in ("fsdp", "megatron"):
        mine = steady(f"GRPO {backend}")
        if trl and mine:
            out.append(
                row("3", f"hfsdk {backend} / TRL tokens/s", "info", f"{mine / trl:.2f}",
                    ratio=mine / trl)
            )  # fmt: skip
    return out


def table(rows: list[dict[str, Any]]) -> str:
    """The markdown table of every row."""
    lines = ["| part | check | status | result |", "|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['part']} | {r['check']} | {r['status']} | {r['result']} |")
    return "\n".join(lines)


def versions() -> dict[str, str]:
    """Versions of the packages the check exercises (and the device it found)."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": sys.version.split()[0]}
    for name in ("torch", "transformers", "megatron-core", "trl", "accelerate", "datasets",
                 "tensordict", "cattrs"):  # fmt: skip
        with contextlib.suppress(PackageNotFoundError):
            out[name] = version(name)
    import torch

    if torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name(0)
    return out


def commit() -> str | None:
    """The tree's git commit, when it is a git checkout."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        done = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
            timeout=10,
        )  # fmt: skip
        if done.returncode == 0:
            return done.stdout.strip()
    return None


def parent_main(args: argparse.Namespace) -> int:
    """Build the assets, run the jobs one after another, print and write the table."""
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("--device cuda: torch sees no CUDA device here; use --device cpu --tiny")
        return 2
    prof = profile(args.device, args.tiny, args.dtype)
    started = time.perf_counter()
    limit = args.time_limit_s or prof.time_limit_s
    args.out.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        if args.workdir is None:
            args.workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="gpuchk_")))
        workdir = args.workdir
        workdir.mkdir(parents=True, exist_ok=True)
        written = ensure_tree_plugins(workdir / "site")
        if written:
            print(f"plugin entry points written for: {', '.join(written)}")
        print(f"building the {prof.name} models ...", flush=True)
        assets = build_assets(prof, workdir)
        print(f"assets ready after {time.perf_counter() - started:.0f} s", flush=True)
        rows: list[dict[str, Any]] = []
        walls: dict[str, float] = {}
        for name in args.jobs:
            left = limit - (time.perf_counter() - started) - 5
            if left < 20:
                rows.append(row("-", f"{name} job", "fail", f"not started: {limit:.0f} s spent"))
                continue
            result = run_job(name, args, workdir, args.out, left * JOB_SHARE[name])
            rows.extend(result["rows"])
            walls[name] = result["wall_s"]
        rows.extend(ratio_rows(rows))
        rows.sort(key=lambda r: r["part"])
        passed = not any(r["status"] == "fail" for r in rows)
        report = {
            "passed": passed,
            "device": args.device,
            "mode": prof.name,
            "commit": commit(),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "versions": versions(),
            "model": {
                "shape": prof.model,
                "parameters": task.parameter_count(assets.model_dir),
                "resume_shape": prof.resume_model,
            },
            "settings": {
                "grpo": attrs.asdict(prof.grpo),
                "resume": attrs.asdict(prof.resume),
                "greedy_prompts": prof.greedy_prompts,
                "greedy_width": prof.greedy_width,
            },
            "job_wall_s": walls,
            "wall_s": time.perf_counter() - started,
            "rows": rows,
        }
    text = table(rows)
    print()
    print(text)
    verdict = "PASSED" if passed else "FAILED"
    print(f"\n{verdict} in {report['wall_s']:.0f} s; versions {report['versions']}")
    for name, body in (("gpu_check.json", json.dumps(report, indent=2, default=str)),
                       ("gpu_check.md", text + "\n")):  # fmt: skip
        tmp = args.out / (name + ".tmp")
        tmp.write_text(body)
        tmp.rename(args.out / name)
    return 0 if passed else 1


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line arguments (``--job`` is for the child processes)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--device", choices=("cuda", "cpu"), required=True)
    p.add_argument(
        "--tiny", action="store_true",
        help="the small mode: tiny model, few steps (on CPU; on CUDA a quick smoke test)",
    )  # fmt: skip
    p.add_argument("--out", type=Path, required=True, help="folder for the table and logs")
    p.add_argument("--workdir", type=Path, help="models and runs (default: a temp dir)")
    p.add_argument("--jobs", nargs="+", choices=JOBS, default=list(JOBS), help="which jobs to run")
    p.add_argument(
        "--time-limit-s", type=float, default=0.0,
        help="stop starting or running jobs after this (default 500 s; tiny 600 s)",
    )  # fmt: skip
    p.add_argument(
        "--dtype", choices=("float32", "bfloat16"),
        help="training dtype (default: bfloat16; float32 in the tiny mode)",
    )  # fmt: skip
    p.add_argument("--job", choices=JOBS, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.device == "cpu" and not args.tiny:
        p.error("the full check needs a GPU; on CPU run the small mode: --device cpu --tiny")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point (parent or child)."""
    args = parse_args(argv)
    if args.job:
        child_main(args)
        return 0
    return parent_main(args)


if __name__ == "__main__":
    sys.exit(main())
