"""The built-in multi-turn task ``tool_use``: two-number addition with an ``add`` tool.

``hfsdk run --algo NAME --task tool_use``. See :mod:`.task` (prompts, tool, reward)
and :mod:`.build` (tokenizer, warm start, cached assets, the run preset).
"""
