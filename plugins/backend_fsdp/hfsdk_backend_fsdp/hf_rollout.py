"""HF ``generate`` rollout backend (implemented in the end-to-end training issue)."""

from __future__ import annotations


class HFRollout:
    """Generates responses with transformers' ``generate`` on the actor's weights."""
