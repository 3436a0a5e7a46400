"""DAPO (Yu et al., 2025) as an hfsdk algorithm plugin: GRPO's group advantages plus
clip-higher, token-mean loss, overlong reward shaping and dynamic sampling."""
