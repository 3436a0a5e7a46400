"""``hfsdk list KIND``: the names in one registry with one-line docs."""

from __future__ import annotations

import click


@click.command(name="list")
@click.argument("kind", metavar="[KIND]", required=False)
def list_entries(kind: str | None) -> None:
    """List registered names of KIND, e.g. algorithms, advantage-estimators, reward-functions.

    KIND is one of the core's: algorithms, advantage-estimators, policy-losses,
    value-losses, kl-estimators, reward-functions (or rewards), rollout-backends,
    training-backends, transfer-protocols, tasks, or a kind an installed plugin adds
    (rollout-corrections, reward-styles, ...; a bare ``hfsdk list`` shows them all).
    """
    from hfsdk.core.plugin_manager import get_plugin_manager

    manager = get_plugin_manager()
    if kind is None:  # a bare `hfsdk list`: what can be listed
        click.echo("hfsdk list KIND, where KIND is one of:")
        for name in manager.registry_kinds():
            click.echo(f"  {name.replace('_', '-')}")
        return
    registry = manager.registry(kind)
    if not registry:
        click.echo(f"no {registry.what}s are registered")
    else:
        width = max(len(name) for name in registry)
        for name, entry in registry.items():
            click.echo(f"{name:<{width}}  {entry.summary}  [{entry.plugin}]")
    if failed := manager.failed_plugins():
        # Some may have added names of this kind: say which plugins and why, never omit silently.
        click.echo("these plugins failed to load; names of this kind may be missing:")
        for info in failed:
            reason = (info.error or "no reason given").strip().splitlines()[0]
            where = info.distribution or "in-process"
            click.echo(f"  {info.name}  [{where}]  failed to load: {reason}")
