"""Example third-party hfsdk plugin: a tool and an agent loop."""
