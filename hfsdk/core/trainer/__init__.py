"""The trainer loop: data, steps, metrics, validation and checkpoints."""
