"""FSDP2 training backend for HF transformers models and HF-generate rollout."""
