"""Supervised fine-tuning (``hfsdk run --algo sft``) as an algorithm plugin."""
