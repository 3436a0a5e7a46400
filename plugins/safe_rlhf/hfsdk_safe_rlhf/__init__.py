"""Safe-RLHF (PPO-Lagrangian): cost model, cost critic, Lagrange multiplier."""
