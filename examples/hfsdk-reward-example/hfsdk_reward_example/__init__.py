"""Example third-party hfsdk plugin registering the ``keyword_bonus`` reward function."""
