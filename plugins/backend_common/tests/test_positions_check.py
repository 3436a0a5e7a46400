"""The ``model_positions`` preflight check reads a local model's positions off its config.json."""

from __future__ import annotations

import json
from pathlib import Path

from hfsdk_backend_common.positions_check import model_positions


def test_model_positions_reads_the_config_of_a_local_model(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": 4096}))
    assert model_positions(str(tmp_path)) == (4096, "max_position_embeddings")
    (tmp_path / "config.json").write_text(json.dumps({"text_config": {"n_positions": 512}}))
    assert model_positions(str(tmp_path)) == (512, "n_positions")
    assert model_positions(str(tmp_path / "nope")) is None
    assert model_positions("Qwen/Qwen2.5-0.5B") is None  # a hub name: nothing to read here
