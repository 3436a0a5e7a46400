"""Hook specifications the migration plugin adds (through ``hfsdk_addhooks``)."""

from __future__ import annotations

import pluggy

from hfsdk import Register

hookspec = pluggy.HookspecMarker("hfsdk")


@hookspec
def hfsdk_register_prompt_describers(register: Register) -> None:
    """Register lines ``hfsdk data inspect`` adds about a dataset: ``register(name, describe)``.

    ``describe(rows, tokenizer, model_path)`` gets the loaded prompt rows (dataset columns plus
    ``rendered_prompt``), the run's tokenizer and its model directory (``None`` when unknown)
    and returns report lines (``[]`` when it has nothing to say about these rows), e.g. the
    image-token counts of image prompts. It may raise :class:`hfsdk.HfsdkError` (one line) for
    rows a run would refuse.
    """
