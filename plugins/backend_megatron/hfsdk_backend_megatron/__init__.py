"""megatron-core TP/PP training backend (3D layouts)."""
