"""``hfsdk plugins``: what is installed and which hooks each plugin implements."""

from __future__ import annotations

import json

import click


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--check", is_flag=True, help="Also run every registration hook (importing the "
              "plugins, torch included), so a plugin failing there shows failed.")  # fmt: skip
def plugins(as_json: bool, check: bool) -> None:
    """List installed plugins, their distributions, versions and hooks."""
    from hfsdk.core.plugin_manager import get_plugin_manager

    pm = get_plugin_manager()
    for kind in pm.registry_kinds() if check else ():  # else filled lazily, at first use
        pm.registry(kind)
    infos = pm.plugins
    if as_json:
        click.echo(json.dumps([info.to_dict() for info in infos], indent=2))
        return
    for info in infos:
        dist = f"{info.distribution} {info.version}" if info.distribution else "(in-process)"
        click.echo(f"{info.name}  [{info.status}]  {dist}")
        for hook in info.hooks:
            click.echo(f"    {hook}")
        if info.error:
            click.echo(f"    error: {info.error}")
