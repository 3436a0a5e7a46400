"""GRPO throughput: hfsdk against TRL's ``GRPOTrainer`` on the same task, one after the other.

    .venv-bench/bin/python benchmarks/vs_trl.py --steps 10 [--out results.json]
    .venv-bench/bin/python benchmarks/vs_trl.py --task compute --rounds 3

The script starts child processes in turn (never at the same time, so they
do not compete for the CPU): hfsdk's GRPO, then TRL's ``GRPOTrainer`` on the
same model directory, tokenizer and prompt file, ``--rounds`` times
(interleaved, so slow phases of a shared machine hit both sides alike). It
prints one markdown table per round, the medians over rounds, the machine's
load average, and with ``--out`` writes the numbers as JSON.

Tasks (``--task``):

- ``default``: the built-in default task (tiny Llama model, local tokenizer,
  single-digit addition prompts, rule reward), 16 prompts x 4 samples x 8
  new tokens: small enough that framework overhead matters.
- ``compute``: compute-bound (``compute_bound_task.py``): a freshly
  initialised ~30M-parameter Llama (8 layers, hidden 512, 4,096-word
  vocabulary, so responses run to the length limit), the default task's
  prompts and reward, 8 prompts x 4 samples x 64 new tokens.

Setup (TRL is installed only for the benchmark, never into ``.venv``)::

    python3.11 -m venv .venv-bench
    .venv-bench/bin/pip install "torch==2.13.0+cpu"
    .venv-bench/bin/pip install -e . -e plugins/backend_fsdp -e plugins/grpo "trl==1.16.0"

Run it with ``.venv-bench/bin/python``, or from ``.venv`` with
``--trl-python .venv-bench/bin/python`` (the TRL side then runs in that
interpreter, the hfsdk side in the current one). Without TRL the script
prints these commands and exits with status 2. Both children run offline
(``HF_HUB_OFFLINE=1``) with their frameworks' default threading: TRL's
process uses every core (torch's default), hfsdk gives each worker its share
of the cores (``trainer.worker_threads``, auto). ``OMP_NUM_THREADS`` set
when calling the script caps both.

What is measured (the same way on both sides):

- tokens: per training step, the prompt tokens without padding plus the
  response tokens up to and including the first EOS, summed over the step's
  ``batch_size x group_size`` samples. hfsdk: the step's ``attention_mask``
  sum (``perf/throughput_tokens_per_s x timing/step_s`` in ``metrics.jsonl``).
  TRL: the growth of ``state.num_input_tokens_seen`` over the step, which
  ``GRPOTrainer`` raises by the prompt lengths plus completion lengths.
- step time: wall time of one training step: generation, log-probs (and
  reference log-probs), reward, advantages and the optimizer update. hfsdk:
  ``timing/step_s`` (controller-side, including Ray calls). TRL: a
  ``TrainerCallback`` from ``on_step_begin`` to ``on_step_end`` (generation
  happens inside the step; logging, which follows ``on_step_end``, is not
  counted).
- tokens/s: total tokens / total step time; "steps 2+" leaves out step 1
  (first-call warm-up); "median step" is the median of the per-step rates
  (least disturbed by other load on a shared machine). Total wall: the child
  process from start to exit (imports, Ray start-up, model loading, hfsdk's
  final checkpoint).
- reward: the mean reward of the step's samples (hfsdk ``reward/mean``, TRL
  ``reward``), first and last step.

Matched settings: model dir, tokenizer, prompts (the default task's
``train.jsonl``; BOS added by the tokenizer on both sides), group size (TRL
``num_generations``), prompts per step, max response length, temperature 1,
top-p 1, top-k off, learning rate (constant, no warm-up, AdamW betas
0.9/0.999, eps 1e-8, no weight decay), grad-norm clip 1.0, PPO clip 0.2, one
optimizer step per training step (hfsdk ``actor.mini_batch_size`` = TRL's
effective batch = all samples of the step, and the same micro-batch size:
TRL ``per_device_train_batch_size`` with ``gradient_accumulation_steps``), a
KL loss with the k3 estimator and coefficient ``--beta`` (TRL's default
``beta`` is 0, which skips the reference model; 0.01 is hfsdk's default
``kl_loss_coef`` and makes both sides run the reference model), token-mean
loss aggregation (TRL ``loss_type="dapo"``, its default), group-std
advantage scaling (TRL ``scale_rewards="group"``, its default; hfsdk
``advantage.epsilon`` is set to TRL's 1e-4), precision ``--dtype``: by
default TRL's own default, bfloat16 mixed precision (TRL ``bf16=True`` with
float32 weights; hfsdk ``actor.dtype=bfloat16`` with float32 master weights
and ``reference.dtype=bfloat16``), or ``float32`` on both sides, no gradient
checkpointing (TRL's GRPO default is on), seed 0.

What cannot be matched exactly:

- Old log-probs: hfsdk always runs an extra forward pass for the rollout
  policy's log-probs; TRL skips it when each batch is used for exactly one
  optimizer step (it uses the detached current log-probs). hfsdk does one
  more forward pass per step.
- Prompt length: TRL 1.16 has no prompt-length limit; hfsdk drops prompts
  longer than ``--max-prompt-length``. The default task's prompts are 5
  tokens, so nothing is dropped.
- Response padding: hfsdk pads responses to the max response length for the
  training forward passes; TRL pads to the longest completion of the batch.
- Dual clip: hfsdk's ``ppo_clip`` also bounds the loss of negative-advantage
  tokens at ratio 3 (``clip_ratio_c``); TRL has no such bound. With one
  update per batch the ratio is 1, so it never applies here.
- Data order: both shuffle the 100 prompts with seed 0 but with different
  samplers, so the prompts of step k differ; the rewards are comparable only
  as trends.
- Execution: hfsdk runs the model in one Ray worker (the controller sends it
  batches); TRL runs everything in its own process.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

REPO = Path(__file__).resolve().parent.parent
BENCH_VENV_PYTHON = REPO / ".venv-bench" / "bin" / "python"
TRL_VERSION = "1.16.0"
# The default plugins depend on one another (GRPO on the built-in task, its
# rewards on the sandbox, ...), so every plugin is installed but the two with
# heavy engines, as docs/benchmarks.md "Setup" says.
HEAVY_PLUGINS = frozenset({"rollout_vllm", "backend_megatron"})
BENCH_PLUGINS = tuple(
    f"plugins/{path.parent.name}"
    for path in sorted(REPO.glob("plugins/*/pyproject.toml"))
    if path.parent.name not in HEAVY_PLUGINS
)
INSTALL_COMMANDS = (
    "python3.11 -m venv .venv-bench",
    '.venv-bench/bin/pip install "torch==2.13.0+cpu"',
    ".venv-bench/bin/pip install -e . "
    + " ".join(f"-e {plugin}" for plugin in BENCH_PLUGINS)
    + f' "trl=={TRL_VERSION}"',
)
CHILD_ENV = {
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "RAY_DEDUP_LOGS": "0",
}


@attrs.frozen(kw_only=True)
class Settings:
    """The run settings both sides use."""

    task: str = "default"
    """``default`` (the built-in task) or ``compute`` (the ~30M-parameter model)."""
    steps: int = 10
    batch_size: int = 16
    """Prompts per training step."""
    group_size: int = 4
    """Samples per prompt (TRL ``num_generations``)."""
    lr: float = 3e-4
    micro_batch_size: int = 0
    """Samples per forward/backward pass; 0 means all samples of a step in one pass."""
    max_prompt_length: int = 64
    max_response_length: int = 8
    temperature: float = 1.0
    beta: float = 0.01
    """KL loss coefficient (hfsdk ``algorithm.kl_loss_coef``, TRL ``beta``)."""
    seed: int = 0
    dtype: str = "bfloat16"
    """Compute dtype of both sides: ``bfloat16`` mixed precision (TRL's default ``bf16=True``;
    float32 master weights; hfsdk ``actor.dtype``/``reference.dtype``) or ``float32``."""
    rollout: str = "hf"
    """hfsdk's rollout backend (``--rollout vllm``: the vLLM plugin; TRL's side is unchanged)."""
    device: str = "cpu"
    """Where TRL trains: ``cpu`` (``use_cpu=True``) or ``cuda`` (``scripts/gpu_check.py``)."""

    @property
    def samples(self) -> int:
        """Samples (responses) per training step."""
        return self.batch_size * self.group_size

    @property
    def micro(self) -> int:
        """The micro-batch size in samples."""
        return self.micro_batch_size or self.samples

    def check(self) -> None:
        """Exit with a clear message when the settings cannot run on both sides."""
        if min(self.steps, self.batch_size, self.group_size) < 1:
            sys.exit("--steps, --batch-size and --group-size must be at least 1")
        if self.group_size < 2:
            sys.exit("--group-size must be at least 2: GRPO compares the samples of a prompt")
        if self.samples % self.micro != 0:
            sys.exit(
                f"--micro-batch-size {self.micro} must divide batch_size x group_size = "
                f"{self.samples}; pick a divisor of {self.samples}"
            )


DEFAULTS = Settings()
TASK_DEFAULTS = {
    "default": {"steps": 10, "batch_size": 16, "group_size": 4, "max_response_length": 8},
    "compute": {"steps": 6, "batch_size": 8, "group_size": 4, "max_response_length": 64},
}
"""Per task, the values the command-line options default to."""


# -- hfsdk side ------------------------------------------------------------------


def task_assets(s: Settings, workdir: Path) -> tuple[str, str]:
    """``(model_dir, train_jsonl)`` of the task (the compute task is built in ``workdir``)."""
    if s.task == "compute":
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from compute_bound_task import ensure_compute_bound_assets

        model_dir, train_jsonl = ensure_compute_bound_assets(workdir / "compute_task")
        return str(model_dir), str(train_jsonl)
    from hfsdk_tasks import ensure_default_assets

    assets = ensure_default_assets()
    return str(assets.model_dir), str(assets.train_jsonl)


def hfsdk_overrides(
    s: Settings, model_dir: str | None = None, train_jsonl: str | None = None
) -> list[str]:
    """Config overrides that make hfsdk's GRPO run the benchmark settings."""
    task: list[str] = []
    if s.task == "compute":
        from hfsdk_tasks import REWARD_FUNCTION_NAME

        task = [
            f"actor.model_path={model_dir}",
            f"reference.model_path={model_dir}",
            f"data.train_files=[{train_jsonl}]",
            f"reward.functions=[{{name: {REWARD_FUNCTION_NAME}}}]",
        ]
    return [
        *task,
        f"trainer.total_steps={s.steps}",
        f"trainer.seed={s.seed}",
        "trainer.loggers=[jsonl]",
        "trainer.val_every=0",
        "trainer.save_every=0",
        f"data.batch_size={s.batch_size}",
        f"data.max_prompt_length={s.max_prompt_length}",
        "data.shuffle=true",
        f"algorithm.n_samples_per_prompt={s.group_size}",
        f"algorithm.kl_loss_coef={s.beta}",
        "algorithm.kl_estimator=k3",
        "algorithm.loss_agg_mode=token-mean",
        "algorithm.entropy_coef=0.0",
        "advantage.norm_by_std=true",
        "advantage.epsilon=1e-4",
        "policy_loss.clip_ratio_low=0.2",
        "policy_loss.clip_ratio_high=0.2",
        f"actor.optim.lr={s.lr}",
        "actor.optim.lr_schedule=constant",
        "actor.optim.warmup_steps=0",
        "actor.optim.weight_decay=0.0",
        "actor.optim.grad_clip=1.0",
        f"actor.mini_batch_size={s.samples}",
        f"actor.micro_batch_size={s.micro}",
        "actor.ppo_epochs=1",
        f"actor.dtype={s.dtype}",
        f"reference.dtype={s.dtype}",
        "actor.gradient_checkpointing=false",
        f"reference.micro_batch_size={s.micro}",
        f"reference.mini_batch_size={s.samples}",
        f"rollout.max_prompt_length={s.max_prompt_length}",
        f"rollout.max_response_length={s.max_response_length}",
        f"rollout.temperature={s.temperature}",
        "rollout.top_p=1.0",
        "rollout.top_k=0",
        f"rollout.backend={s.rollout}",
    ]


def run_hfsdk(s: Settings, workdir: Path, extra: Sequence[str] = ()) -> dict[str, Any]:
    """Train with hfsdk; per-step tokens, step times and rewards, plus the task's asset paths."""
    from hfsdk.core.config import load_run_config
    from hfsdk.core.trainer.trainer import Trainer

    model_dir, train_jsonl = task_assets(s, workdir)
    config = load_run_config("grpo", None, [*hfsdk_overrides(s, model_dir, train_jsonl), *extra])
    metrics = Trainer(config, workdir / "hfsdk_run", quiet=True).fit()
    steps = [
        {
            "step_s": m["timing/step_s"],
            # The trainer logs tokens / step time; multiplying back gives the integer count.
            "tokens": round(m["perf/throughput_tokens_per_s"] * m["timing/step_s"]),
            "reward": m["reward/mean"],
            "controller_share": m.get("perf/controller_overhead_share"),
            "stages_s": {
                k.removeprefix("timing/").removesuffix("_s"): v
                for k, v in m.items()
                if k.startswith("timing/")
            },
            # The planner's per-stage utilisation: achieved FLOP/s and, with a calibrated
            # placement.cluster, the share of its peak (perf/<stage>_mfu).
            "utilisation": {k: v for k, v in m.items() if k.endswith(("_flops_per_s", "_mfu"))},
        }
        for m in metrics
    ]
    return {
        "steps": steps,
        "model_dir": model_dir,
        "train_jsonl": train_jsonl,
        "versions": _versions(),
    }


# -- TRL side --------------------------------------------------------------------


def default_task_reward_for_trl(
    prompts: list[str], completions: list[str], answer: list[str] | None = None, **_: Any
) -> list[float]:
    """hfsdk's default-task reward with TRL's reward-function signature.

    TRL passes the decoded prompts and completions plus every dataset column
    (``answer`` here) and bookkeeping keywords (``completion_ids``,
    ``trainer_state``, ...), which this adapter ignores.
    """
    from hfsdk_tasks import default_task_reward

    return default_task_reward(prompts, completions, answer=answer)


def trl_config(s: Settings, output_dir: Path) -> Any:
    """The ``GRPOConfig`` that matches :func:`hfsdk_overrides` (see the module docstring)."""
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=str(output_dir),
        use_cpu=s.device == "cpu",
        bf16=s.dtype == "bfloat16",
        fp16=False,
        seed=s.seed,
        max_steps=s.steps,
        learning_rate=s.lr,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        adam_beta1=0.9,
        adam_beta2=0.999,
        adam_epsilon=1e-8,
        max_grad_norm=1.0,
        # One optimizer step per training step over all batch_size x group_size samples, in
        # micro-batches of the same size as hfsdk's; one generation per optimizer step.
        per_device_train_batch_size=s.micro,
        gradient_accumulation_steps=s.samples // s.micro,
        steps_per_generation=s.samples // s.micro,
        num_iterations=1,
        num_generations=s.group_size,
        max_completion_length=s.max_response_length,
        temperature=s.temperature,
        top_p=1.0,
        top_k=0,
        beta=s.beta,
        epsilon=0.2,
        loss_type="dapo",
        scale_rewards="group",
        mask_truncated_completions=False,
        gradient_checkpointing=False,
        shuffle_dataset=True,
        model_init_kwargs={"dtype": "float32"},
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        dataloader_num_workers=0,
    )


def run_trl(
    s: Settings,
    workdir: Path,
    model_dir: str,
    train_jsonl: str,
    reward_funcs: Sequence[Any] | None = None,
) -> dict[str, Any]:
    """Train with TRL's ``GRPOTrainer``; per-step tokens, step times and rewards.

    ``reward_funcs`` (TRL's signature) default to the default task's reward.
    """
    import datasets
    import torch
    from transformers import AutoTokenizer, TrainerCallback
    from trl import GRPOTrainer

    print(f"TRL side: {torch.get_num_threads()} intra-op threads", flush=True)

    class StepTimer(TrainerCallback):
        """Wall time and tokens of each optimizer step (generation happens inside it)."""

        def __init__(self) -> None:
            self.steps: list[dict[str, float]] = []
            self._started = 0.0
            self._tokens = 0

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self._started = time.perf_counter()
            self._tokens = state.num_input_tokens_seen

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.steps.append(
                {
                    "step_s": time.perf_counter() - self._started,
                    "tokens": float(state.num_input_tokens_seen - self._tokens),
                }
            )

    rows = [json.loads(line) for line in Path(train_jsonl).read_text().splitlines() if line]
    dataset = datasets.Dataset.from_list(rows)
    tokenizer = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
    timer = StepTimer()
    trainer = GRPOTrainer(
        model=model_dir,
        reward_funcs=list(reward_funcs or [default_task_reward_for_trl]),
        args=trl_config(s, workdir / "trl_run"),
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[timer],
    )
    trainer.train()
    rewards = [entry["reward"] for entry in trainer.state.log_history if "reward" in entry]
    if len(rewards) != len(timer.steps):
        raise RuntimeError(
            f"TRL logged {len(rewards)} rewards for {len(timer.steps)} steps; "
            "expected one per step (logging_steps=1)"
        )
    steps = [{**step, "reward": r} for step, r in zip(timer.steps, rewards, strict=True)]
    return {"steps": steps, "versions": _versions()}


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("torch", "transformers", "trl", "accelerate", "ray", "hfsdk"):
        with contextlib.suppress(PackageNotFoundError):
            out[name] = version(name)
    return out


# -- parent: runs both children and prints the table -------------------------------


def trl_version(python: str) -> str | None:
    """TRL's version as ``python`` sees it, or ``None`` when it cannot import TRL."""
    probe = subprocess.run(
        [python, "-c", "import importlib.metadata as m, trl; print(m.version('trl'))"],
        capture_output=True,
        text=True,
        env={**os.environ, **CHILD_ENV},
    )
    return probe.stdout.strip() if probe.returncode == 0 else None


def find_trl_python(requested: str | None) -> str | None:
    """The interpreter that can import TRL: ``--trl-python``, this one, or ``.venv-bench``."""
    candidates = [requested] if requested else [sys.executable, str(BENCH_VENV_PYTHON)]
    for python in candidates:
        if python and Path(python).exists() and trl_version(python) is not None:
            return python
    return None


def run_child(python: str, side: str, s: Settings, workdir: Path, extra: Sequence[str]) -> dict:
    """Run one side in a child process; its result plus the child's wall time."""
    result_path = workdir / f"{side}_result.json"
    log_path = workdir / f"{side}.log"
    command = [
        python, str(Path(__file__).resolve()), "--side", side,
        "--settings", json.dumps(attrs.asdict(s)), "--workdir", str(workdir), *extra,
    ]  # fmt: skip
    started = time.perf_counter()
    with log_path.open("w") as log:
        done = subprocess.run(
            command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **CHILD_ENV},
            cwd=REPO,
        )  # fmt: skip
    wall = time.perf_counter() - started
    if done.returncode != 0 or not result_path.exists():
        tail = "\n".join(log_path.read_text().splitlines()[-40:])
        sys.exit(f"the {side} run failed (exit {done.returncode}); end of {log_path}:\n{tail}")
    result = json.loads(result_path.read_text())
    result["wall_s"] = wall
    return result


def summarize(result: dict[str, Any]) -> dict[str, float]:
    """Table numbers of one side from its per-step records."""
    steps = result["steps"]
    step_s = sum(x["step_s"] for x in steps)
    tokens = sum(x["tokens"] for x in steps)
    later = steps[1:] or steps
    later_s = sum(x["step_s"] for x in later)
    return {
        "tokens_per_s": tokens / step_s,
        "steady_tokens_per_s": sum(x["tokens"] for x in later) / later_s,
        # Robust to the odd step slowed by other load on a shared machine.
        "median_tokens_per_s": statistics.median(x["tokens"] / x["step_s"] for x in steps),
        "median_later_tokens_per_s": statistics.median(x["tokens"] / x["step_s"] for x in later),
        "tokens_per_step": tokens / len(steps),
        "step_time_s": step_s,
        "wall_s": result["wall_s"],
        "reward_first": steps[0]["reward"],
        "reward_last": steps[-1]["reward"],
    }


COLUMNS = (
    ("tokens_per_s", "tokens/s", "{:.0f}"),
    ("steady_tokens_per_s", "tokens/s (steps 2+)", "{:.0f}"),
    ("median_tokens_per_s", "tokens/s (median step)", "{:.0f}"),
    ("median_later_tokens_per_s", "tokens/s (median step 2+)", "{:.0f}"),
    ("tokens_per_step", "tokens/step", "{:.0f}"),
    ("step_time_s", "step time s (sum)", "{:.1f}"),
    ("wall_s", "total wall s", "{:.1f}"),
    ("reward_first", "reward step 1", "{:.3f}"),
    ("reward_last", "reward last step", "{:.3f}"),
)


def table(rows: dict[str, dict[str, float]]) -> str:
    """Markdown table: one row per side and the hfsdk/TRL ratio of every column."""
    lines = [
        "| | " + " | ".join(title for _, title, _ in COLUMNS) + " |",
        "|---|" + "---:|" * len(COLUMNS),
    ]
    for side, numbers in rows.items():
        cells = [fmt.format(numbers[key]) for key, _, fmt in COLUMNS]
        lines.append(f"| {side} | " + " | ".join(cells) + " |")
    if "TRL" in rows:  # not with --skip-trl
        hf, trl = rows["hfsdk"], rows["TRL"]
        ratios = [f"{hf[k] / trl[k]:.2f}" if trl[k] else "-" for k, _, _ in COLUMNS]
        lines.append("| hfsdk/TRL | " + " | ".join(ratios) + " |")
    return "\n".join(lines)


def stage_table(result: dict[str, Any]) -> str:
    """hfsdk's mean seconds per stage over steps 2+ (controller-side wall time of each stage)."""
    later = result["steps"][1:] or result["steps"]
    names = [k for k in later[0]["stages_s"] if k != "step"]
    means = {k: statistics.mean(x["stages_s"].get(k, 0.0) for x in later) for k in names}
    step = statistics.mean(x["step_s"] for x in later)
    lines = [
        "| stage | s/step | share | GFLOP/s | of the calibrated peak |",
        "|---|---:|---:|---:|---:|",
    ]

    def utilisation(name: str, suffix: str) -> float | None:
        values = [x.get("utilisation", {}).get(f"perf/{name}{suffix}") for x in later]
        present = [v for v in values if v is not None]
        return statistics.mean(present) if present else None

    for name, value in means.items():
        rate, mfu = utilisation(name, "_flops_per_s"), utilisation(name, "_mfu")
        gflops = "" if rate is None else f"{rate / 1e9:.0f}"
        share = "" if mfu is None else f"{mfu:.0%}"
        lines.append(f"| {name} | {value:.3f} | {value / step:.0%} | {gflops} | {share} |")
    lines.append(f"| step | {step:.3f} | 100% | | |")
    shares = [x["controller_share"] for x in later if x.get("controller_share") is not None]
    if shares:
        median = statistics.median(shares)
        lines.append(f"| controller overhead (median) | | {median:.1%} | | |")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line arguments (``--side`` and ``--settings`` are for the child processes)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--task", choices=sorted(TASK_DEFAULTS), default="default")
    p.add_argument("--rounds", type=int, default=1, help="hfsdk/TRL pairs, run one after another")
    p.add_argument("--steps", type=int, help="default: 10 (default task), 6 (compute)")
    p.add_argument("--batch-size", type=int, help="prompts per step (16 / 8)")
    p.add_argument("--group-size", type=int, help="samples per prompt (4)")
    p.add_argument("--lr", type=float, default=DEFAULTS.lr)
    p.add_argument(
        "--micro-batch-size",
        type=int,
        default=0,
        help="samples per forward/backward pass (default: all samples of a step)",
    )
    p.add_argument("--max-response-length", type=int, help="new tokens (8 / 64)")
    p.add_argument(
        "--dtype",
        choices=("float32", "bfloat16"),
        default=DEFAULTS.dtype,
        help="compute dtype of both sides (default bfloat16: mixed precision, TRL's default "
        "bf16=True)",
    )
    p.add_argument("--beta", type=float, default=DEFAULTS.beta, help="KL loss coefficient")
    p.add_argument(
        "--hfsdk-override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra hfsdk config override (for trying a setting; the table is for defaults)",
    )
    p.add_argument("--skip-trl", action="store_true", help="run only the hfsdk side")
    p.add_argument("--out", type=Path, help="also write the results as JSON here")
    p.add_argument(
        "--rollout",
        choices=("hf", "vllm"),
        default="hf",
        help="hfsdk's rollout backend; TRL generates with HF generate either way (its vLLM "
        "colocate mode does not run on CPU)",
    )
    p.add_argument(
        "--trl-python",
        help="interpreter with TRL installed (default: this one, else .venv-bench/bin/python)",
    )
    p.add_argument("--workdir", type=Path, help="where runs and logs go (default: a temp dir)")
    p.add_argument("--side", choices=("hfsdk", "trl"), help=argparse.SUPPRESS)
    p.add_argument("--settings", help=argparse.SUPPRESS)
    p.add_argument("--model-dir", help=argparse.SUPPRESS)
    p.add_argument("--train-jsonl", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def child_main(args: argparse.Namespace) -> None:
    """One side's run, written to ``<workdir>/<side>_result.json``."""
    s = Settings(**json.loads(args.settings))
    if args.side == "hfsdk":
        result = run_hfsdk(s, args.workdir, args.hfsdk_override)
    else:
        result = run_trl(s, args.workdir, args.model_dir, args.train_jsonl)
    (args.workdir / f"{args.side}_result.json").write_text(json.dumps(result))


def settings_from(args: argparse.Namespace) -> Settings:
    """The settings of the command line, with the task's defaults for what it leaves out."""
    chosen = dict(TASK_DEFAULTS[args.task])
    for key in chosen:
        value = getattr(args, key)
        if value is not None:
            chosen[key] = value
    return Settings(
        task=args.task,
        lr=args.lr,
        micro_batch_size=args.micro_batch_size,
        beta=args.beta,
        rollout=args.rollout,
        dtype=args.dtype,
        **chosen,
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Run hfsdk, then TRL, ``--rounds`` times, and print the tables and medians."""
    args = parse_args(argv)
    if args.side:
        child_main(args)
        return
    s = settings_from(args)
    s.check()
    trl_python = None if args.skip_trl else find_trl_python(args.trl_python)
    if trl_python is None and not args.skip_trl:
        where = args.trl_python or f"{sys.executable} or {BENCH_VENV_PYTHON}"
        print(f"TRL is not importable from {where}. Install it beside hfsdk (run in {REPO}):")
        for command in INSTALL_COMMANDS:
            print(f"    {command}")
        print("then run: .venv-bench/bin/python benchmarks/vs_trl.py")
        sys.exit(2)
    if trl_python is not None:
        found = trl_version(trl_python)
        if found != TRL_VERSION:
            print(f"note: TRL {found} found; the settings were checked against TRL {TRL_VERSION}")
    rounds: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="hfsdk_vs_trl_") as tmp:
        base = args.workdir or Path(tmp)
        for index in range(args.rounds):
            workdir = base / f"round{index + 1}"
            workdir.mkdir(parents=True, exist_ok=True)
            load = os.getloadavg()[0]
            print(
                f"round {index + 1}: hfsdk GRPO ({s.task} task, {s.steps} steps, "
                f"{s.batch_size} prompts x {s.group_size}), load {load:.1f} ...",
                flush=True,
            )
            extra = [a for o in args.hfsdk_override for a in ("--hfsdk-override", o)]
            hf = run_child(sys.executable, "hfsdk", s, workdir, extra)
            record: dict[str, Any] = {"hfsdk": hf, "load_before": load}
            rows = {"hfsdk": summarize(hf)}
            if trl_python is not None:
                print("TRL GRPOTrainer (same settings) ...", flush=True)
                paths = ["--model-dir", hf["model_dir"], "--train-jsonl", hf["train_jsonl"]]
                record["trl"] = run_child(trl_python, "trl", s, workdir, paths)
                rows["TRL"] = summarize(record["trl"])
            record["load_after"] = os.getloadavg()[0]
            record["summary"] = rows
            rounds.append(record)
            print()
            print(table(rows))
            print()
            print(stage_table(hf))
            print(f"load average (1 min) before/after: {load:.1f} / {record['load_after']:.1f}\n")
    if len(rounds) > 1:
        print(median_table(rounds))
    print(f"\nhfsdk: {rounds[0]['hfsdk']['versions']}")
    if "trl" in rounds[0]:
        print(f"TRL side: {rounds[0]['trl']['versions']}")
    if args.out:
        report = {"settings": attrs.asdict(s), "rounds": rounds, "cores": os.cpu_count()}
        args.out.write_text(json.dumps(report, indent=2))
        print(f"results written to {args.out}")


def median_table(rounds: list[dict[str, Any]]) -> str:
    """Medians over rounds of the steady tokens/s of each side and of their ratio."""
    key = "median_later_tokens_per_s"
    hf = [r["summary"]["hfsdk"][key] for r in rounds]
    lines = [f"medians over {len(rounds)} rounds (tokens/s, median step of steps 2+):"]

    def line(name: str, values: list[float], fmt: str) -> str:
        listed = ", ".join(fmt.format(x) for x in values)
        return f"  {name} {fmt.format(statistics.median(values))}  (rounds: {listed})"

    lines.append(line("hfsdk", hf, "{:.0f}"))
    if all("TRL" in r["summary"] for r in rounds):
        trl = [r["summary"]["TRL"][key] for r in rounds]
        lines.append(line("TRL", trl, "{:.0f}"))
        lines.append(line("hfsdk/TRL", [a / b for a, b in zip(hf, trl, strict=True)], "{:.2f}"))
    return "\n".join(lines)


if __name__ == "__main__":
    main()
