from __future__ import annotations

import click

from placer.cli.common import (
    echo_json,
    hardware_option,
    load_inputs,
    workload_doc,
    workload_options,
    workload_text,
)
from placer.problem.inspect import inspect_model
from placer.specs.units import format_bytes, format_tokens


@click.command("inspect")
@click.argument("model")
@hardware_option()
@workload_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def inspect_command(model, hardware, as_json, **kw):
    """Per-layer memory of MODEL (catalog name, spec file or config.json) and, with --hardware,
    the per-device view of the published packing arithmetic."""
    m, fleet, wl = load_inputs(model, hardware, **kw)
    doc = inspect_model(m, wl, fleet)
    doc["workload"] = workload_doc(wl)
    if as_json:
        echo_json(doc)
        return
    stored = wl.weights_as_stored and any(x.weight_groups for x in m.layers)
    weights = "weights as stored" if stored else f"{wl.weight_bits}-bit weights"
    click.echo(f"{m.name}: {doc['totals']['layers']} nodes, {doc['totals']['params']:,} parameters "
               f"({weights}, {wl.kv_bits}-bit KV, {wl.state_bits}-bit state, "
               f"context {format_tokens(wl.context_tokens)})")
    click.echo(workload_text(wl))
    click.echo(f"{'idx':>4} {'name':<14} {'kind':<17} {'mixer':<15} {'ffn':<6} {'params':>17} "
               f"{'weights':>11} {'KV B/token':>10} {'state B/req':>12}")
    for r in doc["layers"]:
        idx = "" if r["index"] is None else r["index"]
        click.echo(f"{idx!s:>4} {r['name']:<14} {r['kind']:<17} {r['mixer'] or '-':<15} {r['ffn'] or '-':<6} "
                   f"{r['params']:>17,} {format_bytes(r['weight_bytes']):>11} {r['kv_bytes_per_token']:>10,} "
                   f"{r['state_bytes_per_request']:>12,}")
    t = doc["totals"]
    click.echo(f"{'':>4} {'total':<14} {'':<17} {'':<15} {'':<6} {t['params']:>17,} "
               f"{format_bytes(t['weight_bytes']):>11} {t['kv_bytes_per_token']:>10,} "
               f"{t['state_bytes_per_request']:>12,}")
    if stored:
        click.echo("")
        click.echo("weights by tensor group, as the checkpoint stores them:")
        for g in doc["precision"]:
            click.echo(f"  {g['role']:<14} {g['precision']:<48} {g['params']:>17,} params "
                       f"{format_bytes(g['bytes']):>11}")
    if "device" in doc:
        d = doc["device"]
        click.echo("")
        click.echo(f"per device ({d['name']}, {format_bytes(d['memory_bytes'])} = {d['memory_bytes']:,} B):")
        for kind, w in d["weight_bytes_per_layer"].items():
            click.echo(f"  {kind:<17} {format_bytes(w):>10} per layer ({w:,} B) -> "
                       f"{d['layers_per_device'][kind]} per device")
        if d["kv_reserve_bytes"] is not None:
            click.echo(f"  KV reserve beside one dense layer: {format_bytes(d['kv_reserve_bytes'])} "
                       f"({d['kv_reserve_bytes']:,} B)")
            click.echo(f"  KV per request per dense layer at {format_tokens(d['context_tokens'])}: "
                       f"{format_bytes(d['kv_bytes_per_request_per_layer'])} "
                       f"({d['kv_bytes_per_request_per_layer']:,} B)")
            click.echo(f"  concurrency ceiling: floor({d['kv_reserve_bytes']:,} / "
                       f"{d['kv_bytes_per_request_per_layer']:,}) = {d['concurrency_ceiling']}")
