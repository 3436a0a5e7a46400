"""The megatron actor's generation EOS ids follow transformers' generation config.

A model directory without generation_config.json gets the generation config
transformers derives from config.json (what the fsdp actor's loaded module
holds), so an ``eos_token_id`` list there ends the megatron rollout too.
"""

from __future__ import annotations

from pathlib import Path

from hfsdk_backend_megatron.engine import MegatronEngine


def _engine_on(model_dir: Path) -> MegatronEngine:
    """An engine shell that only knows its model directory (no model is built)."""
    engine = object.__new__(MegatronEngine)
    engine.model_dir = model_dir
    engine._hf_config = None
    return engine


def _save_config(directory: Path, eos: int | list[int]) -> Path:
    from transformers import Qwen2Config

    Qwen2Config(
        vocab_size=128, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, eos_token_id=eos,
    ).save_pretrained(str(directory))  # fmt: skip
    (directory / "generation_config.json").unlink(missing_ok=True)
    return directory


def test_config_json_eos_ids_without_a_generation_config(tmp_path: Path) -> None:
    model_dir = _save_config(tmp_path, [2, 100])
    assert not (model_dir / "generation_config.json").exists()
    assert 100 in _engine_on(model_dir).generation_eos_ids


def test_a_generation_config_file_still_wins(tmp_path: Path) -> None:
    from transformers import GenerationConfig

    model_dir = _save_config(tmp_path, [2, 100])
    GenerationConfig(eos_token_id=7).save_pretrained(str(model_dir))
    assert _engine_on(model_dir).generation_eos_ids == [7]
