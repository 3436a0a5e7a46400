"""Reading checkpoint files without running code from them.

``torch.load`` with ``weights_only=False`` unpickles whatever a file names, so a checkpoint
from elsewhere could run code when a run resumes from it. hfsdk reads its files with
``weights_only=True`` and an allow-list of what it saves beyond tensors and builtins: numpy
arrays and scalars (RNG state, batch columns) and :class:`~hfsdk.core.batch.Batch`. A file
naming any other type is refused in one line, naming it.
"""

from __future__ import annotations

import pickle
import re
from pathlib import Path
from typing import Any

from hfsdk.core.errors import HfsdkError


def allowed_globals() -> list[Any]:
    """The types beyond tensors and builtins that hfsdk's checkpoint files hold."""
    import numpy as np

    from hfsdk.core.batch import Batch

    multiarray = (getattr(np, "_core", None) or np.core).multiarray  # numpy 2 renamed numpy.core
    numbers = "?" + np.typecodes["AllInteger"] + np.typecodes["AllFloat"]  # all int/float sizes
    dtypes = {type(np.dtype(kind)) for kind in numbers + "OU"}
    return [np.ndarray, np.dtype, multiarray._reconstruct, multiarray.scalar, *dtypes, Batch]


def load_checkpoint_file(path: str | Path, map_location: Any = "cpu") -> Any:
    """``torch.load(path, weights_only=True)`` with hfsdk's allow-list; anything else refused."""
    import torch

    try:
        with torch.serialization.safe_globals(allowed_globals()):
            return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as exc:
        # torch names a refused function "GLOBAL x.f", a refused object "but got <class 'x.C'>".
        found = re.search(r"(?:GLOBAL |but got <class ')([^\s']+)", str(exc))
        what = f"a {found.group(1)!r} object hfsdk does not save" if found else "damaged data"
        raise HfsdkError(
            f"checkpoint file {str(path)!r} holds {what}; it is not loaded (unpickling it "
            "could run code): resume from a checkpoint hfsdk wrote"
        ) from None
