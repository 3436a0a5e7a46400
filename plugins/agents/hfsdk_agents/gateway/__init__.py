"""The OpenAI-compatible gateway: agents written against the OpenAI API, trained as they are.

During a step's rollout the ``gateway`` agent loop serves the policy on
127.0.0.1 (:mod:`.server`), one session per trajectory (:mod:`.session`), and
calls the configured agent program (:mod:`.agents`) with the session's base URL.
What the model produced is captured as the engine's tokens and log-probs
(docs/agents.md, "The OpenAI-compatible gateway").
"""
