"""The plugin's commands: ``hfsdk replay`` and ``hfsdk export``."""
