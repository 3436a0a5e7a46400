"""hfsdk serve: the Tinker training API on hfsdk (fsdp backend, LoRA, several users per base model)."""
