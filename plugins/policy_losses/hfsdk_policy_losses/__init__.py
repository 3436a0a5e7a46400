"""The standard policy losses, ``ppo_clip`` and ``reinforce``, registered into hfsdk's
``policy_losses`` registry (``algorithm.policy_loss``; settings in the ``policy_loss``
section). Algorithms add their own losses the same way (DAPO's ``dapo_clip``, GSPO).
"""
