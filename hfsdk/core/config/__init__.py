"""Run configuration: attrs sections, YAML + dotted overrides, strict structuring."""

from hfsdk.core.config.run_config import RunConfig, load_run_config, resolve_run_config

__all__ = ["RunConfig", "load_run_config", "resolve_run_config"]
