"""Prompt datasets: loading, filtering, tokenising and batching."""
