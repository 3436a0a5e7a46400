"""The rollout backend of ``docs/plugin_hooks.md``, run as written, trains GRPO.

The doc's code block is installed as a plugin distribution (an entry point on
``sys.path``, found like a pip-installed one) and selected by the name it
registers; two GRPO steps run in-process with it. Each step's batch must hold
``algorithm.n_samples_per_prompt`` responses per prompt, the full contract
batch (what the actor's log-prob pass reads), sampled (a prompt's responses
differ), and the actor must train on it.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest

import hfsdk
from hfsdk.core.config import load_run_config
from hfsdk.core.plugin_manager import get_plugin_manager, get_registry
from hfsdk.core.trainer.trainer import Trainer
from tests.conftest import make_distribution

DOC = Path(__file__).resolve().parents[2] / "docs" / "plugin_hooks.md"
N = 4
RUN = [
    "data.batch_size=2",
    f"algorithm.n_samples_per_prompt={N}",
    "actor.mini_batch_size=8",
    "actor.micro_batch_size=8",
    "rollout.max_response_length=6",
    "trainer.total_steps=2",
]


class _Batches(hfsdk.StepObserver):
    """Keeps every step's trained batch."""

    def __init__(self) -> None:
        self.batches: list[Any] = []

    def on_step_trained(self, view: Any) -> None:
        self.batches.append(view.algorithm.last_batch)


def doc_example_source() -> str:
    """The python block of ``docs/plugin_hooks.md`` that opens with ``# my_rollout/plugin.py``."""
    blocks = re.findall(r"^```python\n(.*?)^```", DOC.read_text(), re.M | re.S)
    found = [block for block in blocks if block.startswith("# my_rollout/plugin.py\n")]
    assert len(found) == 1, f"{DOC} has {len(found)} python blocks for the rollout example"
    return found[0]


@pytest.fixture
def doc_rollout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The doc's example installed as the ``my-rollout`` distribution; the name it registers."""
    site = tmp_path / "site"
    site.mkdir()
    make_distribution(site, "my-rollout", "my_rollout", "my_rollout_plugin", doc_example_source())
    monkeypatch.syspath_prepend(str(site))
    names = [n for n, e in get_registry("rollout_backends").items() if e.plugin == "my_rollout"]
    assert len(names) == 1, names
    return names[0]


def test_hfsdk_list_describes_the_example_by_its_docstring(doc_rollout: str) -> None:
    from click.testing import CliRunner

    from hfsdk.core.cli.main import cli

    impl = get_registry("rollout_backends")[doc_rollout].impl
    first_line = impl.__doc__.strip().splitlines()[0]
    result = CliRunner().invoke(cli, ["list", "rollout-backends"])
    assert result.exit_code == 0, result.output
    line = rf"^{doc_rollout} +{re.escape(first_line)}  \[my_rollout\]$"
    assert re.search(line, result.output, re.M), result.output


def test_the_doc_rollout_example_trains_grpo(doc_rollout: str, tmp_path: Path) -> None:
    observer = _Batches()

    class Watch:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_step_observers(register: Any) -> None:
            register("test_batches", lambda config, run_dir: observer)

    get_plugin_manager().pm.register(Watch, name="test_batches")
    config = load_run_config("grpo", None, [*RUN, f"rollout.backend={doc_rollout}"])
    assert type(config.rollout).__module__ == "my_rollout_plugin"
    metrics = Trainer(config, tmp_path / "run", quiet=True).fit()

    assert len(metrics) == 2 and len(observer.batches) == 2
    for batch, row in zip(observer.batches, metrics, strict=True):
        uids = list(batch["uid"])
        prompts = list(dict.fromkeys(uids))
        assert len(prompts) == 2 and all(uids.count(u) == N for u in prompts)
        # a prompt's N responses are consecutive (interleaved), as the contract says
        assert uids == [u for u in prompts for _ in range(N)]
        assert batch.meta["temperature"] == 1.0 and batch.meta["greedy"] is False
        assert batch["input_ids"].shape[1] == batch["prompts"].shape[1] + 6
        groups = batch["responses"].view(len(prompts), N, -1)
        # sampled, not greedy: at least one prompt's responses differ
        assert any(len({tuple(r.tolist()) for r in group}) > 1 for group in groups)
        assert math.isfinite(row["actor/pg_loss"])
        assert row["actor/grad_norm"] > 0
