from __future__ import annotations

import click

from ..catalog import list_hardware, list_models
from ..fleet import load_fleet
from ..model import load_model
from ..units import format_bytes


@click.command("models")
def models_command():
    """List the model catalog."""
    for path in list_models():
        m = load_model(path)
        kinds = ", ".join(f"{n} {k}" for k, n in m.count_by_kind().items())
        click.echo(f"{m.name:<18} {m.total_params / 1e9:>9.1f}B params  {kinds}")


@click.command("hardware")
def hardware_command():
    """List the hardware catalog."""
    for path in list_hardware():
        f = load_fleet(path)
        types = ", ".join(f"{t.name} {format_bytes(t.memory_bytes)}" for t in f.device_types.values())
        click.echo(f"{f.name:<12} {len(f.available):>4} devices  {types}")
