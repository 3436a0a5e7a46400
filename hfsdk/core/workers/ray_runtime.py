"""Connecting to Ray: start a quiet local instance, or join a cluster.

``connect()`` is idempotent. Without an address (and without ``RAY_ADDRESS``)
it starts a local instance sized to the machine: every CPU, the GPUs Ray
finds, and — so that pools work on CPU-only machines — ``virtual_devices``
slots of the custom resource :data:`VIRTUAL_DEVICE_RESOURCE`; no dashboard,
warnings-only logging. With an address (``--ray-address`` on the command line
or ``RAY_ADDRESS``) it joins that cluster; its nodes must then offer GPUs or
the virtual-device resource.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
from pathlib import Path
from typing import Any

import attrs

from hfsdk.core.errors import HfsdkError

logger = logging.getLogger(__name__)

VIRTUAL_DEVICE_RESOURCE = "hfsdk_device"
"""Custom Ray resource standing in for a device on machines without GPUs."""

VIRTUAL_DEVICES_ENV = "HFSDK_VIRTUAL_DEVICES"
"""Environment variable overriding the number of virtual devices of a local instance."""

PRIVATE_RESOURCE = "hfsdk_private_instance"  # marks a run's own local instance: auto refuses it


@attrs.frozen(kw_only=True)
class RayInfo:
    """What :func:`connect` connected to."""

    address: str
    started_locally: bool
    device_resource: str
    devices: float
    cpus: float


def default_virtual_devices() -> int:
    """Virtual device slots of a local instance: ``HFSDK_VIRTUAL_DEVICES``, else max(CPUs, 4).

    Slots are time-shared by processes, so there may be more than cores; four
    lets the usual 2 x 2 layouts run on a small machine.
    """
    raw = os.environ.get(VIRTUAL_DEVICES_ENV)
    if raw:
        try:
            value = int(raw)
        except ValueError:
            value = 0
        if value < 1:
            raise HfsdkError(f"{VIRTUAL_DEVICES_ENV}={raw!r}: expected a positive integer")
        return value
    return max(os.cpu_count() or 1, 4)


def resolve_address(address: str | None) -> str | None:
    """The cluster to join: ``address``, else ``RAY_ADDRESS``, else ``None`` (start locally)."""
    if address:
        return address
    return os.environ.get("RAY_ADDRESS") or None


def auto_address() -> str:
    """What ``auto`` joins: ``RAY_ADDRESS``, else the cluster ``ray start`` recorded here."""
    from ray._private.services import find_bootstrap_address

    # Not Ray's fallback, any Ray running here: it finds other runs' private instances.
    found = os.environ.get("RAY_ADDRESS", "").removesuffix("auto") or find_bootstrap_address(None)
    if not found:
        raise HfsdkError(
            "no Ray cluster recorded for trainer.ray_address=auto in Ray's default temp dir; "
            "give its address (HOST:PORT or RAY_ADDRESS), start one with 'ray start --head', or "
            "drop trainer.ray_address"
        )
    return str(found)


REACH_TIMEOUT_S = 5.0
"""How long :func:`check_reachable` waits for a cluster's head to accept a connection."""


def check_reachable(address: str, timeout_s: float = REACH_TIMEOUT_S) -> str:
    """Raise a one-line :class:`HfsdkError` unless ``address``'s head accepts a TCP connection.

    ``ray.init`` on an address nobody listens at retries for many minutes and
    prints a warning per retry; this answers within ``timeout_s``. Returns the
    address to join (``auto`` resolved by :func:`auto_address`; ``local`` as is).
    """
    import socket

    if address == "local":
        return address
    address = auto_address() if address == "auto" else address
    host_port = address.split("://", 1)[-1].rstrip("/")
    host, sep, port_text = host_port.rpartition(":")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise HfsdkError(
            f"Ray address {address!r} is not HOST:PORT (e.g. 10.0.0.1:6379 or "
            "ray://10.0.0.1:10001); fix --ray-address / RAY_ADDRESS"
        )
    try:
        with socket.create_connection((host.strip("[]"), int(port_text)), timeout=timeout_s):
            return address
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise HfsdkError(
            f"Ray address {address!r} is unreachable ({reason} within {timeout_s:g} s); start "
            "the cluster there ('ray start --head'), fix --ray-address / RAY_ADDRESS, or leave "
            "both unset to start a local instance"
        ) from None


def device_resource_name() -> str:
    """``"GPU"`` when the connected cluster has GPUs, else the virtual-device resource."""
    import ray

    return "GPU" if ray.cluster_resources().get("GPU", 0) > 0 else VIRTUAL_DEVICE_RESOURCE


_STARTED_LOCALLY = False


def connect(
    address: str | None = None,
    *,
    num_cpus: int | None = None,
    virtual_devices: int | None = None,
    object_store_memory: int | None = None,
    death_timeout_s: float | None = None,
    log_to_driver: bool = True,
    namespace: str | None = None,
    allow_no_auth: bool = False,
) -> RayInfo:
    """Start a local Ray instance, or join ``address`` / ``RAY_ADDRESS``; idempotent.

    Local-start options: ``num_cpus`` (default: all), ``virtual_devices``
    (default :func:`default_virtual_devices`), ``object_store_memory`` (bytes;
    default Ray's), ``death_timeout_s`` (how fast a silent node is declared
    dead: Ray's health checks are set to about this many seconds). A second
    call returns the current connection; asking for a different address while
    connected is an error.

    A local instance starts no dashboard and keeps Ray's token
    authentication on (its ports listen on every interface, which Ray 2.60
    does not let a local instance change); with ``RAY_AUTH_MODE`` set to
    anything but ``token`` it is refused unless ``allow_no_auth``
    (``trainer.ray_allow_no_auth``). Joining a cluster keeps its own settings.
    """
    import ray

    target = resolve_address(address)
    if ray.is_initialized():
        current = _current_address()
        if address and address not in ("auto", current) and not _same_address(address, current):
            raise HfsdkError(
                f"already connected to Ray at {current}; cannot also join {address} — call "
                "hfsdk.core.workers.shutdown() first"
            )
        return _info(current, _STARTED_LOCALLY)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    common: dict[str, Any] = {
        "logging_level": logging.WARNING,
        "log_to_driver": log_to_driver,
        "namespace": namespace,
    }
    if target is not None:
        joined = check_reachable(target)
        logger.info("Ray: joining the cluster at %s ...", joined)
        ray.init(address=joined, **common)
        if target == "auto" and ray.cluster_resources().get(PRIVATE_RESOURCE):
            ray.shutdown()
            raise HfsdkError(
                f"trainer.ray_address=auto found {joined}, another hfsdk run's private Ray "
                "instance (it stops with that run); start a shared one with 'ray start --head'"
            )
        return _info(_current_address(), False)
    devices = virtual_devices or default_virtual_devices()
    kwargs: dict[str, Any] = {
        # "local": a new instance even if `ray start` left a cluster on this machine;
        # joining one happens only when asked (address / RAY_ADDRESS).
        "address": "local",
        "num_cpus": num_cpus if num_cpus is not None else os.cpu_count(),
        "resources": {VIRTUAL_DEVICE_RESOURCE: devices, PRIVATE_RESOURCE: 1},
        "include_dashboard": False,
        "object_store_memory": object_store_memory,
        # Ray 2.60 has no setting that keeps a local instance on loopback (its GCS, raylet
        # and its per-node daemons listen on every interface; `_node_ip_address` changes none):
        # token authentication is what guards them, and it must stay on.
    }
    check_auth_mode(allow_no_auth)
    check_temp_space()
    if death_timeout_s is not None:
        kwargs["_system_config"] = health_check_config(death_timeout_s)
    _quiet_auth_notice()
    _set_started(True)
    logger.info(
        "Ray: starting a local instance (%d CPUs, %s virtual device slot(s); a few seconds, "
        "longer on a busy machine) ...",
        kwargs["num_cpus"],
        devices,
    )
    try:
        ray.init(**kwargs, **common)
    except Exception:
        _set_started(False)
        raise
    if not allow_no_auth and not token_auth_enabled():
        shutdown()
        raise HfsdkError(NO_AUTH_MESSAGE.format(mode=os.environ.get(AUTH_MODE_ENV, "unset")))
    keep_token_private()
    return _info(_current_address(), True)


def check_temp_space() -> None:
    """Refuse (one line) a Ray temp dir with under 64 MiB free: on a full one start-up hangs."""
    from ray._common.utils import get_default_ray_temp_dir

    path = Path(get_default_ray_temp_dir())
    free = shutil.disk_usage(next(p for p in (path, *path.parents) if p.exists())).free
    if free < 64 << 20:
        raise HfsdkError(
            f"Ray's temp directory {path} is full ({free >> 20} MiB free, 64 needed); free space "
            "there or point Ray elsewhere with RAY_TMPDIR=/other/dir"
        )


def token_path() -> Path:
    """Where Ray keeps this user's token: ``RAY_AUTH_TOKEN_PATH``, else ``~/.ray/auth_token``."""
    return Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")


def keep_token_private() -> None:
    """Make the token file readable by its owner only (Ray 2.60 writes it with mode 0644)."""
    path = token_path()
    try:
        info = path.stat()
        if info.st_uid == os.getuid() and info.st_mode & 0o077:
            path.chmod(0o600)
    except OSError:  # no file (token in RAY_AUTH_TOKEN), or not ours to change
        pass


AUTH_MODE_ENV = "RAY_AUTH_MODE"
NO_AUTH_MESSAGE = (
    "RAY_AUTH_MODE={mode} would start hfsdk's local Ray instance without token "
    "authentication, and its ports listen on every interface: anyone who reaches this machine "
    "could run code in it; unset RAY_AUTH_MODE (or set it to token), or set "
    "trainer.ray_allow_no_auth=true if this machine's network is trusted"
)


def check_auth_mode(allow_no_auth: bool = False) -> None:
    """Refuse (one line) to start a local instance with token authentication turned off."""
    mode = os.environ.get(AUTH_MODE_ENV)
    if mode is not None and mode.strip().lower() != "token" and not allow_no_auth:
        raise HfsdkError(NO_AUTH_MESSAGE.format(mode=mode))


def token_auth_enabled() -> bool:
    """Whether this process's Ray uses token authentication."""
    from ray._private.authentication.authentication_utils import is_token_auth_enabled

    return bool(is_token_auth_enabled())


class _DropAuthNotice(logging.Filter):
    """Drops Ray's per-start notice that token authentication is on (it stays on)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Keep every record but that notice."""
        return not record.getMessage().startswith("Token authentication is enabled")


_AUTH_LOGGER = "ray._private.authentication.authentication_token_setup"


def _quiet_auth_notice() -> None:
    logger = logging.getLogger(_AUTH_LOGGER)
    if not any(isinstance(f, _DropAuthNotice) for f in logger.filters):
        logger.addFilter(_DropAuthNotice())


def health_check_config(death_timeout_s: float) -> dict[str, int]:
    """Ray system config that declares a silent node dead after about ``death_timeout_s``."""
    if death_timeout_s <= 0:
        raise HfsdkError(f"death_timeout_s={death_timeout_s!r}: expected seconds > 0")
    period_ms = 1000 if death_timeout_s >= 2 else 500
    return {
        "health_check_initial_delay_ms": 0,
        "health_check_period_ms": period_ms,
        "health_check_timeout_ms": period_ms,
        "health_check_failure_threshold": max(1, math.floor(death_timeout_s * 1000 / period_ms)),
    }


def shutdown() -> None:
    """Disconnect from Ray (stopping the local instance if :func:`connect` started it)."""
    import ray

    if ray.is_initialized():
        ray.shutdown()
    _set_started(False)


def _set_started(value: bool) -> None:
    global _STARTED_LOCALLY
    _STARTED_LOCALLY = value


def _current_address() -> str:
    import ray

    return str(ray.get_runtime_context().gcs_address)


def _same_address(a: str, b: str) -> bool:
    return a.removeprefix("ray://").rstrip("/") == b.removeprefix("ray://").rstrip("/")


def _info(address: str, started: bool) -> RayInfo:
    import ray

    resources = ray.cluster_resources()
    device = device_resource_name()
    return RayInfo(
        address=address,
        started_locally=started,
        device_resource=device,
        devices=float(resources.get(device, 0.0)),
        cpus=float(resources.get("CPU", 0.0)),
    )


# The public surface's names (``hfsdk.connect_ray``, ``hfsdk.shutdown_ray``): plain
# ``connect``/``shutdown`` would not say what they connect to.
connect_ray = connect
shutdown_ray = shutdown
