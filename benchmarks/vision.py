"""The visual task against the text default task at the same language-model size.

Runs GRPO in a fresh ``hfsdk run`` process per row (in-process workers, one device) and
prints each run's median step time, tokens/s (``perf/throughput_tokens_per_s``), the
sequence width, and the process's peak resident set size (``ru_maxrss`` of the run's
process: Python, torch and the libraries included, so compare differences):

- ``text``: the built-in default task (a Llama: hidden 128, 2 layers, 4 heads);
- ``shapes``: the ``shapes`` task with its tiny Qwen2-VL's language model at that size
  (hidden 128, 2 layers, 4 heads, FFN 384) and its vision tower (1 block, width 32)
  trainable;
- ``shapes, tower frozen``: the same with ``actor.freeze_vision: true``.

Both tasks sample 8 prompts × 8 responses a step; the text task's responses are its own
(a few tokens), the visual one's one token (each image prompt adds its image tokens).

    .venv/bin/python benchmarks/vision.py --steps 12

Results are in docs/benchmarks.md ("Vision-language").
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

SAME_SIZE = {"hidden_size": 128, "num_layers": 2, "num_heads": 4, "intermediate_size": 384}


def _shapes_config(work: Path) -> Path:
    """The shapes task's settings with the language model at the default task's size."""
    from hfsdk_vision.model import TinyVLMSpec
    from hfsdk_vision.shapes_task import ShapesTaskSpec, ensure_shapes_assets, shapes_settings

    spec = ShapesTaskSpec(model=TinyVLMSpec(**SAME_SIZE, mrope_section=(4, 6, 6)))
    settings = shapes_settings(ensure_shapes_assets(spec))
    path = work / "shapes.yaml"
    path.write_text(yaml.safe_dump(settings))
    return path


def _run(name: str, args: list[str], run_dir: Path) -> dict[str, float | str]:
    """One ``hfsdk run`` in its own process; its metrics and peak memory."""
    hfsdk = str(Path(sys.executable).with_name("hfsdk"))
    command = [hfsdk, "run", "--algo", "grpo", "--run-dir", str(run_dir), "--quiet", *args]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    if status != 0:
        raise SystemExit(f"{name}: {' '.join(command)} failed:\n{process.stderr.read().decode()}")
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    timed = rows[2:]  # the first steps warm caches up
    return {
        "run": name,
        "step s": statistics.median(r["timing/step_s"] for r in timed),
        "tokens/s": statistics.median(r["perf/throughput_tokens_per_s"] for r in timed),
        "width": statistics.median(r["perf/sequence_width"] for r in timed),
        "peak RSS MiB": usage.ru_maxrss / 1024,
    }


def main() -> None:
    """Run the three rows and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=12)
    args = parser.parse_args()
    if args.steps < 3:
        # _run times rows[2:], so fewer steps would leave nothing to take a median of.
        parser.error(
            f"--steps {args.steps} is too few: the first 2 steps warm caches up and are "
            "not timed, so at least 3 are needed; pass --steps 3 or more"
        )
    common = [
        f"trainer.total_steps={args.steps}",
        "trainer.executor=local",
        "data.batch_size=8",
        "algorithm.n_samples_per_prompt=8",
    ]
    with tempfile.TemporaryDirectory(prefix="hfsdk-vision-bench-") as tmp:
        work = Path(tmp)
        shapes = ["--config", str(_shapes_config(work)), *common]
        rows = [
            _run("text (default task)", common, work / "text"),
            _run("shapes", shapes, work / "shapes"),
            _run("shapes, tower frozen", [*shapes, "actor.freeze_vision=true"], work / "frozen"),
        ]
    header = list(rows[0])
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        cells = [f"{v:.3f}" if isinstance(v, float) and v < 10 else
                 (f"{v:.0f}" if isinstance(v, float) else v) for v in row.values()]  # fmt: skip
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
