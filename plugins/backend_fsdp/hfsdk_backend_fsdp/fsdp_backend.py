"""FSDP2 training backend (implemented in the end-to-end training issue)."""

from __future__ import annotations


class FSDPBackend:
    """Builds a role's HF model under FSDP2 and implements the worker operations."""
