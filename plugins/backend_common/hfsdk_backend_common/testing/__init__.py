"""Helpers for tests and benchmarks: synthetic weights, local gloo process launches."""
