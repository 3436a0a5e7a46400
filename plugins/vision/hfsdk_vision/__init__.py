"""Vision-language RL for hfsdk (docs/multimodal.md): a tiny locally built Qwen2-VL, verl's
multimodal parquet layout, the image-token invariant, multimodal log-probs and generation, and
the ``shapes`` visual task (``--task shapes``), data and reward."""
