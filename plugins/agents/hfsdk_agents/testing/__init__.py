"""Fixtures for tests of agents and of code built on them (chat-template families)."""
