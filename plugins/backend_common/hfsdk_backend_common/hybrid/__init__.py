"""The hybrid-engine half of the shared home: model formats, decoder, reshard, groups.

3D-HybridEngine: the actor trains with layout (p, t, d) and generates with
(pg, tg, dg, d) on the same ranks, p * t = pg * tg * dg. Each rank keeps its
training shard and all-gathers only inside its micro data-parallel group (dg
ranks) to build its generation shard; nothing is gathered globally and no second
full copy of the model is kept. The layout maths (:mod:`.layout`), parameter
specs (:mod:`.param_spec`), transition accounting (:mod:`.accounting`) and the
rollout layout config (:mod:`.layout_config`) are pure Python, shared by the
backends and the planner. See ``docs/hybrid_engine.md``.
"""
