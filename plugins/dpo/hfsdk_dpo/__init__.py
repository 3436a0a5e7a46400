"""Direct preference optimisation (``hfsdk run --algo dpo``) as an algorithm plugin."""
