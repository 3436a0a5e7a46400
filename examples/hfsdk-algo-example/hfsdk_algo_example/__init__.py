"""Example third-party algorithm plugin for hfsdk: REINFORCE with a batch-mean baseline."""
