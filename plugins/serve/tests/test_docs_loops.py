"""docs/serve.md's two loops, run as written against the shared loopback server."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "serve.md"


def python_blocks(text: str) -> list[str]:
    """The ```python blocks of a markdown text, in order."""
    return re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)


def test_doc_has_both_loops() -> None:
    blocks = python_blocks(DOC.read_text())
    assert len(blocks) == 2
    assert '"cross_entropy"' in blocks[0] and '"importance_sampling"' in blocks[1]


@pytest.mark.slow
def test_supervised_loss_falls_and_rl_reward_rises(
    served: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The supervised loop's loss falls and the RL loop's reward rises on the built-in task.

    Catches a wrong sign or reduction in a loss, gradients that do not reach the
    adapter, an optimizer step that does nothing, log-probs of the wrong tokens
    and samplers that do not see the trained weights.
    """
    monkeypatch.setenv("HFSDK_SERVE_URL", served.url)
    namespace: dict[str, Any] = {"__name__": "serve_doc"}
    supervised, rl = python_blocks(DOC.read_text())
    exec(compile(supervised, f"{DOC}:supervised", "exec"), namespace)
    losses = namespace["losses"]
    # Measured (shared 2-core machine): 2.14 nats per answer at step 0, 0.10 at step 7.
    assert losses[-1] < 0.5 * losses[0], losses
    exec(compile(rl, f"{DOC}:rl", "exec"), namespace)
    rewards = namespace["rewards"]
    # Measured: first two steps 0.48, last four 0.73 (this loop); the same loop with other
    # prompt/LoRA seeds rose from 0.17 to 0.86 and from 0.67 to 0.93.
    first, last = sum(rewards[:2]) / 2, sum(rewards[-4:]) / 4
    assert last > first + 0.15 and last > 0.6, rewards
    namespace["service"].close("success").result()
