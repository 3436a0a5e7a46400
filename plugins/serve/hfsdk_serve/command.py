"""``hfsdk serve``: start the Tinker API server on a local model directory."""

from __future__ import annotations

import errno
import ipaddress
import logging
import os
import socket
import sys
from pathlib import Path

import click

from hfsdk import HfsdkError, get_registry, unknown_name_message

log = logging.getLogger(__name__)

API_KEY_ENV = "HFSDK_SERVE_API_KEY"


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_listen(host: str, api_key: str | None) -> None:
    """Refuse to listen beyond loopback without a key, and keys the SDK would not send."""
    if api_key is not None and not (api_key.startswith("tml-") and api_key.isascii()):
        raise HfsdkError(
            "the API key must start with 'tml-' and be ASCII (the tinker SDK refuses other keys, "
            "and HTTP headers carry ASCII); "
            "e.g. --api-key tml-$(openssl rand -hex 16)"
        )
    if not is_loopback(host) and api_key is None:
        raise HfsdkError(
            f"--host {host} is reachable from other machines: pass --api-key tml-... (or set "
            f"{API_KEY_ENV}) so only holders of the key can train here, or listen on 127.0.0.1"
        )


def check_port_free(host: str, port: int) -> None:
    """Refuse a ``host:port`` another server holds, before the model loads.

    Binds as uvicorn's ``loop.create_server(host=..., port=...)`` will: every address
    ``host`` resolves to, with ``SO_REUSEADDR`` (asyncio's default off Windows, so a port in
    TIME_WAIT that uvicorn would accept passes) and ``IPV6_V6ONLY`` on IPv6 sockets. The
    sockets are closed again; a server that binds in between is caught after uvicorn.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise HfsdkError(
            f"--host {host}: cannot resolve it ({exc.strerror}); pass an address or name of "
            "this machine, e.g. 127.0.0.1"
        ) from None
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in infos:
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            if sys.platform not in ("win32", "cygwin"):  # as asyncio's reuse_address default
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and hasattr(socket, "IPV6_V6ONLY"):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise HfsdkError(
                        f"port {port} on {host} is in use; pass --port N or stop the other server"
                    ) from None
                raise HfsdkError(
                    f"cannot listen on {host}:{port} ({exc.strerror}); pass a --host of this "
                    "machine and a --port you may bind (1024 or above without privileges)"
                ) from None
    finally:
        for sock in sockets:
            sock.close()


def warn_on_model_name(model_name: str | None) -> None:
    """Warn when ``--model-name`` is not a local directory.

    The SDK's ``SamplingClient.get_tokenizer()`` loads
    ``AutoTokenizer.from_pretrained(<base model name>)`` (the server cannot hand it a
    tokenizer id), so a made-up name fails there; ``TrainingClient.get_tokenizer()`` gets
    the served directory from the server and works regardless. A hub id is not checked
    (that would need the network): it works when it has this model's tokenizer.
    """
    if model_name is None or Path(model_name).is_dir():
        return
    log.warning(
        "hfsdk serve: --model-name %r is not a local directory: SamplingClient.get_tokenizer() "
        "loads AutoTokenizer.from_pretrained(%r) and fails unless that is a hub id with this "
        "model's tokenizer; pass a local path or such a hub id to use it "
        "(TrainingClient.get_tokenizer() works regardless)",
        model_name,
        model_name,
    )


def build_app(
    base_model: str | Path,
    state_dir: str | Path,
    *,
    api_key: str | None = None,
    model_name: str | None = None,
    devices: int = 1,
    executor: str = "auto",
    rollout: str = "hf",
):
    """The ASGI app serving ``base_model`` (starts the worker group, which loads the model)."""
    from hfsdk_serve.app import TinkerApp
    from hfsdk_serve.service import Service

    model_dir = Path(base_model)
    if not (model_dir / "config.json").is_file():
        raise HfsdkError(
            f"--base-model {base_model}: not a model directory (no config.json); pass a local HF "
            "model directory, e.g. the default task's (python -c 'import hfsdk; "
            "print(hfsdk.default_model_dir())')"
        )
    warn_on_model_name(model_name)
    backends = get_registry("rollout_backends")
    if rollout not in backends:
        raise HfsdkError(
            "--rollout: " + unknown_name_message("rollout backend", rollout, sorted(backends))
        )
    service = Service(
        model_dir,
        state_dir,
        model_name=model_name,
        devices=devices,
        executor=executor,  # type: ignore[arg-type]
        rollout=rollout,
    )
    return TinkerApp(service, api_key=api_key)


@click.command("serve")
@click.option(
    "--base-model",
    required=True,
    type=click.Path(file_okay=False),
    help="Local HF model directory every client's LoRA adapters train on.",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on (beyond loopback only with an API key).",
)
@click.option(
    "--port",
    default=8000,
    show_default=True,
    # Not 0: uvicorn would pick a port after the banner, which would then print ":0".
    type=click.IntRange(1, 65535),
    help="Port to listen on (1-65535; 0, an OS-chosen port, is not supported).",
)
@click.option(
    "--state-dir",
    default="serve_state",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Where save_state / save_weights_for_sampler write (a restarted server loads from it).",
)
@click.option(
    "--api-key",
    default=None,
    help=f"Key clients must send (X-API-Key; starts with 'tml-'); default ${API_KEY_ENV}.",
)
@click.option(
    "--model-name",
    default=None,
    help="Name clients pass as base_model (default: the directory path).",
)
@click.option(
    "--devices",
    default=1,
    show_default=True,
    type=click.IntRange(1),
    help="Device slots of the serve worker group (data-parallel ranks).",
)
@click.option(
    "--executor",
    default="auto",
    show_default=True,
    type=click.Choice(["auto", "local", "ray"]),
    help="Where the workers run (as trainer.executor): auto = in this process for one "
    "device, Ray worker processes for several.",
)
@click.option(
    "--rollout",
    default="hf",
    show_default=True,
    help="Rollout backend that samples (hfsdk list rollout-backends): hf (the hfsdk KV-cache "
    "decoder) or vllm (a persistent vLLM engine reloaded with the sampled adapter's merged "
    "weights).",
)
def serve(
    base_model: str,
    host: str,
    port: int,
    state_dir: str,
    api_key: str | None,
    model_name: str | None,
    devices: int,
    executor: str,
    rollout: str,
) -> None:
    """Serve the Tinker training API (forward_backward, optim_step, sample, save/load state)."""
    import uvicorn

    api_key = api_key or os.environ.get(API_KEY_ENV) or None
    check_listen(host, api_key)
    check_port_free(host, port)  # before the model loads and the banner claims the address
    app = build_app(
        base_model,
        state_dir,
        api_key=api_key,
        model_name=model_name,
        devices=devices,
        executor=executor,
        rollout=rollout,
    )
    click.echo(
        f"hfsdk serve: {app.service.model_name} on http://{host}:{port} ({devices} rank(s), "
        f"{'in this process' if app.service.pool.in_process else 'Ray worker processes'})",
        err=True,
    )
    storage = app.service.pool.base_storage()
    if len(storage) > 1:
        shares = ", ".join(f"{held / whole:.3f}" for held, whole in storage)
        click.echo(
            f"hfsdk serve: base weights sharded over {len(storage)} ranks (FSDP2); share of "
            f"the base held by each rank: {shares}",
            err=True,
        )
    try:
        uvicorn.run(app.asgi, host=host, port=port, log_level="warning")
    except SystemExit as exc:
        # uvicorn logs why it could not start (e.g. the port was taken after the check above)
        # and exits 3: end with an hfsdk line and status through the CLI's error handling.
        if exc.code in (None, 0):
            raise
        raise HfsdkError(
            f"could not listen on http://{host}:{port}: the server stopped at startup (uvicorn's "
            "error is above); if another server took the port meanwhile, pass --port N or stop it"
        ) from None
    finally:
        app.close()
