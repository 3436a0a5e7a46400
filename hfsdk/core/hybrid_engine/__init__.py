"""3D-HybridEngine: reshard the actor between its training and generation layouts.

The actor trains with layout (p, t, d) and generates with (pg, tg, dg, d) on the
same ranks, p * t = pg * tg * dg. Each rank keeps its training shard and
all-gathers only inside its micro data-parallel group (dg ranks) to build its
generation shard; nothing is gathered globally and no second full copy of the
model is kept. See ``docs/hybrid_engine.md``.

Heavy imports (torch) happen inside the modules that need them; this package
imports nothing at load time.
"""
