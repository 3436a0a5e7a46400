"""The ``hfsdk_recorded_generations`` example of docs/plugin_hooks.md works as written."""

from __future__ import annotations

import re
import types
from pathlib import Path

import torch

import hfsdk
from hfsdk import Batch

DOC = Path(__file__).resolve().parents[3] / "docs" / "plugin_hooks.md"


def _example(hook: str) -> types.ModuleType:
    """The hook's example (its section's second python block), run as a plugin module."""
    section = re.search(rf"^## {hook}\n(.*?)(?=^## |\Z)", DOC.read_text(), re.M | re.S)
    assert section, f"{hook} is not documented"
    blocks = re.findall(r"```python\n(.*?)```", section.group(1), re.S)
    module = types.ModuleType("doc_example")
    module.__dict__["hfsdk"] = hfsdk  # one namespace: the hook finds the example's class
    exec(compile(blocks[1], str(DOC), "exec"), module.__dict__)
    return module


def _config(rollouts_from: str) -> types.SimpleNamespace:
    return types.SimpleNamespace(trainer=types.SimpleNamespace(rollouts_from=rollouts_from))


def test_the_recorded_generations_example_trains_every_step_on_its_pair(
    tmp_path: Path,
) -> None:
    example = _example("hfsdk_recorded_generations")
    prompts = Batch.from_dict({"input_ids": torch.tensor([[1, 2], [3, 4]])})
    generated = Batch.from_dict({"responses": torch.tensor([[5], [6]])})
    path = tmp_path / "one.pair.pt"
    torch.save({"prompts": prompts, "generated": generated}, path)

    assert example.hfsdk_recorded_generations(_config(str(tmp_path / "run"))) is None
    source = example.hfsdk_recorded_generations(_config(str(path)))
    for step in (1, 2):
        drawn = source.next_batch()
        out, metrics = source.generated(drawn)
        assert torch.equal(drawn["input_ids"], prompts["input_ids"])
        assert torch.equal(out["responses"], generated["responses"]) and metrics == {}
        source.step_done()
        assert source.state_dict() == {"step": step}
    assert source.generated(Batch.from_dict({"input_ids": torch.tensor([[1, 2]])})) is None
    source.load_state_dict({"step": 7})
    source.next_batch()
    assert source.state_dict() == {"step": 8}
