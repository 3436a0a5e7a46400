"""hfsdk serve: the Tinker training API on hfsdk (LoRA clients sharing one base model)."""
