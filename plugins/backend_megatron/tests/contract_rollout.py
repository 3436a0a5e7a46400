"""A third party's rollout backend, written only against ``hfsdk``'s rollout contract.

The code is the worked example of ``docs/plugin_hooks.md``, executed here as
written (:func:`doc_example_source`), so the doc cannot drift from what the
tests run: transformers ``generate`` on a module of the actor's architecture,
loaded from ``actor.hf_weights()`` at every call. It imports nothing of any
training backend, so it must work with the fsdp and the megatron actor alike.
Also the rank side of the megatron check in ``test_rollout_contract.py``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

DOC = Path(__file__).resolve().parents[3] / "docs" / "plugin_hooks.md"
FIRST_LINE = "# my_rollout/plugin.py"


def doc_example_source() -> str:
    """The rollout backend example of ``docs/plugin_hooks.md``: the python block it opens."""
    blocks = re.findall(r"^```python\n(.*?)^```", DOC.read_text(), re.M | re.S)
    found = [block for block in blocks if block.startswith(FIRST_LINE + "\n")]
    assert len(found) == 1, f"{DOC} has {len(found)} python blocks opening with {FIRST_LINE!r}"
    return found[0]


exec(compile(doc_example_source(), f"{DOC}::{FIRST_LINE}", "exec", dont_inherit=True), globals())


def megatron(rank: int, world: int, path: str, prompts: dict, width: int) -> Any:
    """tp=2 megatron actor on two gloo ranks; the collector's greedy responses."""
    import sys

    import hfsdk
    from hfsdk import Batch
    from hfsdk.core.plugin_manager import get_plugin_manager
    from hfsdk_backend_megatron.engine import MegatronEngine
    from hfsdk_backend_megatron.megatron_config import MegatronRoleConfig, ParallelConfig

    get_plugin_manager().pm.register(sys.modules[__name__], name="sampling_contract")

    engine = MegatronEngine(
        MegatronRoleConfig(model_path=path, device="cpu", parallel=ParallelConfig(tp=2)),
        role="actor",
        kind="actor",
    )
    config = SamplingConfig(max_response_length=width)  # type: ignore[name-defined]  # noqa: F821
    rollout = hfsdk.build_rollout(config, engine)
    out = rollout.generate_sequences(Batch.from_dict(tensors=prompts, meta={"greedy": True}))
    return out["responses"] if engine.dp.collects else None
