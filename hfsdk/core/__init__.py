"""The hfsdk core: plugin manager, registries, config, batch protocol, runtime, CLI."""
