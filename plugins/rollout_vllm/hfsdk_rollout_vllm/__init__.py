"""vLLM rollout backend for hfsdk: a colocated engine with in-place weight sync."""
