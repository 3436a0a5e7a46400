"""megatron-core TP/PP training backend (3D layouts)."""

import warnings as _warnings

# megatron-core warns at import that Apex / Transformer Engine are absent and about CUDA-only
# tuning knobs; on CPU that is expected, and every worker would repeat it in the console.
for _pattern in (
    ".*Apex is not installed.*",
    ".*Transformer Engine and Apex are not installed.*",
    ".*full scope is deprecated.*",
    ".*CUDA_DEVICE_MAX_CONNECTIONS.*",
):
    _warnings.filterwarnings("ignore", message=_pattern)
