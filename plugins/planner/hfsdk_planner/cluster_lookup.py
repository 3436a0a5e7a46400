"""Finding a cluster by name: registered presets, profile files, the detected device.

The only part of the cluster code that reads the registry, so the presets
themselves (:mod:`.cluster`) can be registered by the core's plugin without a
cycle through the plugin manager.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from hfsdk import HfsdkError
from hfsdk_planner.cluster import Cluster, a100_80gb, h100_80gb, h200_141gb, local


def cluster_presets() -> dict[str, Callable[[], Cluster]]:
    """Every registered preset (``hfsdk_register_clusters``): name -> factory."""
    from hfsdk import get_registry

    return {name: entry.impl for name, entry in get_registry("clusters").items()}


def is_profile_path(name: str) -> bool:
    """Whether ``name`` reads as a profile file path rather than a preset name."""
    text = str(name).strip()
    return text.endswith((".yaml", ".yml")) or "/" in text or os.sep in text


def get_cluster(name: str | Cluster) -> Cluster:
    """A registered preset by name, a profile YAML by path, or a :class:`Cluster` as is."""
    if isinstance(name, Cluster):
        return name
    text = str(name).strip()
    if is_profile_path(text):
        if not Path(text).expanduser().is_file():
            raise HfsdkError(
                f"cluster profile {text!r} does not exist; write one with `hfsdk calibrate "
                f"--output {text}` or name a preset ({', '.join(sorted(cluster_presets()))})"
            )
        return Cluster.load(Path(text).expanduser())
    presets = cluster_presets()
    factory = presets.get(text.lower())
    if factory is None:
        raise HfsdkError(
            f"unknown cluster preset {name!r}; available: {', '.join(sorted(presets))}, or a "
            "profile YAML path (hfsdk calibrate writes one)"
        )
    cluster = factory()
    if not isinstance(cluster, Cluster):
        raise HfsdkError(
            f"cluster preset {text!r} built {type(cluster).__name__}, not a Cluster; its plugin "
            "must register a function returning hfsdk_planner.Cluster"
        )
    return cluster


def detect_cluster() -> Cluster:
    """This machine as the planner sees it: its CUDA devices if any, else :func:`local`.

    With CUDA the device count and memory are read from the devices; the
    compute and link figures are the ``h200-141gb`` or ``h100-80gb`` preset's
    when the device name says so, else the ``a100-80gb`` preset's (set
    ``placement.cluster`` to a preset or a calibrated profile when they differ).
    Imports torch, so only the trainer calls it.
    """
    import torch

    if not torch.cuda.is_available():
        return local()
    props = torch.cuda.get_device_properties(0)
    name = str(props.name).lower().replace(" ", "-")
    base = h200_141gb() if "h200" in name else h100_80gb() if "h100" in name else a100_80gb()
    return attrs.evolve(
        base,
        name=f"detected-{name}",
        devices_per_node=torch.cuda.device_count(),
        device_memory=float(props.total_memory),
    )


def resolve_cluster(name: str | Cluster) -> Cluster:
    """``auto`` detects this machine (:func:`detect_cluster`); else a preset or profile path."""
    if isinstance(name, str) and name.strip().lower() == "auto":
        return detect_cluster()
    return get_cluster(name)


def cluster_config_problems(config: Any) -> list[str]:
    """``placement.cluster`` names a registered preset, a profile path or ``auto``."""
    value = str(config.placement.cluster)
    text = value.strip()
    if text == "auto" or is_profile_path(text):
        return []  # a profile file is read (and checked) when the planner runs
    presets = cluster_presets()
    if text.lower() in presets:
        return []
    return [
        f"placement.cluster is {value!r}; expected 'auto' (detect this machine), a preset "
        f"({', '.join(sorted(presets))}) or a cluster profile YAML path "
        "(hfsdk calibrate --output FILE)"
    ]
