"""GRPO (and Dr.GRPO, RLOO, REINFORCE++ variants): group advantages, KL loss."""
