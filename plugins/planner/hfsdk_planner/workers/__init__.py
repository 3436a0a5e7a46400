"""Processes ``hfsdk calibrate`` starts (``python -m hfsdk_planner.workers.<name>``)."""
