"""Read an HF model directory's weights (safetensors or torch files) as one state dict."""

from __future__ import annotations

from pathlib import Path

import torch

from hfsdk.core.errors import HfsdkError


def load_hf_state(model_dir: str | Path) -> dict[str, torch.Tensor]:
    """Every tensor saved in ``model_dir`` (all ``*.safetensors`` shards, else ``*.bin``)."""
    directory = Path(model_dir)
    files = sorted(directory.glob("*.safetensors"))
    state: dict[str, torch.Tensor] = {}
    if files:
        from safetensors.torch import load_file

        for path in files:
            state.update(load_file(str(path)))
    else:
        for path in sorted(directory.glob("*.bin")):
            state.update(torch.load(path, map_location="cpu", weights_only=True))
    if not state:
        raise HfsdkError(
            f"no weights (*.safetensors or *.bin) in {str(directory)!r}; pass a directory made "
            "with save_pretrained"
        )
    # Sequence/token classification checkpoints name the backbone ``model.`` too; some
    # older exports prefix it with the class's base name instead.
    return {k.removeprefix("transformer."): v for k, v in state.items()}
