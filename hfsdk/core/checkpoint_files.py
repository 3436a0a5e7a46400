"""Reading checkpoint files without running code from them.

``torch.load`` with ``weights_only=False`` unpickles whatever a file names, so a
checkpoint from elsewhere could run code when a run resumes from it. hfsdk's
files are read with ``weights_only=True`` and an allow-list of exactly the
types hfsdk itself saves beyond tensors and builtins: numpy arrays (the
numpy RNG state, a batch's byte buffers and text columns) and
:class:`~hfsdk.core.batch.Batch` (batches a pipeline generated ahead). A file
that names anything else is refused in one line, naming the type.
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

    core = getattr(np, "_core", None) or np.core  # numpy 2 renamed numpy.core
    dtypes = [type(np.dtype(kind)) for kind in ("u1", "u4", "i8", "f8", "b1", "O", "U1")]
    return [np.ndarray, np.dtype, core.multiarray._reconstruct, *dtypes, Batch]


def load_checkpoint_file(path: str | Path, map_location: Any = "cpu") -> Any:
    """``torch.load(path, weights_only=True)`` with hfsdk's allow-list; anything else refused."""
    import torch

    try:
        with torch.serialization.safe_globals(allowed_globals()):
            return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as exc:
        found = re.search(r"GLOBAL (\S+)", str(exc))
        what = f"a {found.group(1)!r} object hfsdk does not save" if found else "damaged data"
        raise HfsdkError(
            f"checkpoint file {str(path)!r} holds {what}; it is not loaded (unpickling it "
            "could run code): resume from a checkpoint hfsdk wrote"
        ) from None
