"""Fault injection for reliability tests: ``HFSDK_FAULT_INJECT=point:step[,point:step...]``.

Test machinery, not a feature: the core and the backends name their fault points
(``hfsdk.take_fault``, the ``hfsdk_fault_point`` hook) and this plugin decides, from the
environment, which fire and how. Modules: :mod:`.faults` (the points, the step observer).
"""
