"""PPO: GAE, clipped policy loss, value loss, KL-in-reward and its control flow."""
