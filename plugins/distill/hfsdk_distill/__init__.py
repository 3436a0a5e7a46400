"""On-policy distillation: the student samples, frozen teachers score its tokens."""
