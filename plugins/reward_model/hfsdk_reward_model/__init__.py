"""Reward and cost models: Bradley-Terry on preference pairs."""
