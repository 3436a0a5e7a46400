"""Agents written only against the ``openai`` SDK, run by the gateway."""
