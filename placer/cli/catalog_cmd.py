from __future__ import annotations

import click

from placer.cli.common import echo_json
from placer.specs.catalog import list_hardware, list_models
from placer.specs.fleet import load_fleet
from placer.specs.model import load_model
from placer.specs.units import format_bytes, format_tokens
from placer.specs.workload import workload_for


def model_entry(m) -> dict:
    """One catalog model as ``placer models --json`` lists it."""
    return {"name": m.name, "params": m.total_params, "nodes": len(m.layers), "layers": m.count_by_kind(),
            "default_workload": workload_for(m).to_dict(), "max_position_embeddings": m.max_context_tokens,
            "description": m.description, "source": m.source}


def hardware_entry(f) -> dict:
    """One catalog fleet as ``placer hardware --json`` lists it."""
    return {"name": f.name, "devices": len(f.devices), "available": len(f.available),
            "racks": len({d.rack for d in f.devices}),
            "device_types": [{"name": t.name, "kind": t.kind, "memory_bytes": t.memory_bytes,
                              "memory_bandwidth_bytes_per_s": t.memory_bandwidth, "power_w": t.power_w}
                             for t in f.device_types.values()],
            "source": f.source}


@click.command("models")
@click.option("--json", "as_json", is_flag=True, help='Print {"models": [...]}.')
def models_command(as_json):
    """List the model catalog: parameters, layers by kind and the default workload of each."""
    models = [load_model(path) for path in list_models()]
    if as_json:
        echo_json({"models": [model_entry(m) for m in models]})
        return
    click.echo(f"{'model':<18} {'params':>10}  {'default workload':<28} layers")
    for m in models:
        wl = workload_for(m)
        workload = f"{format_tokens(wl.context_tokens)} x {wl.concurrency}, w{wl.weight_bits}/kv{wl.kv_bits}"
        kinds = ", ".join(f"{n} {k}" for k, n in m.count_by_kind().items())
        click.echo(f"{m.name:<18} {m.total_params / 1e9:>9.1f}B  {workload:<28} {kinds}")
    click.echo("default workload: context x live requests, weight / KV bits")


@click.command("hardware")
@click.option("--json", "as_json", is_flag=True, help='Print {"hardware": [...]}.')
def hardware_command(as_json):
    """List the hardware catalog: devices, racks and each device type's memory."""
    fleets = [load_fleet(path) for path in list_hardware()]
    if as_json:
        echo_json({"hardware": [hardware_entry(f) for f in fleets]})
        return
    click.echo(f"{'hardware':<12} {'devices':>7} {'racks':>5}  device types")
    for f in fleets:
        types = ", ".join(f"{t.name} {format_bytes(t.memory_bytes)}" for t in f.device_types.values())
        click.echo(f"{f.name:<12} {len(f.available):>7} {len({d.rack for d in f.devices}):>5}  {types}")
