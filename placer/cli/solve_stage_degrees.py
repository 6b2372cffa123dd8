"""``placer solve --per-stage-tp``: a plan with a degree per stage, printed (a helper of ``placer solve``)."""

from __future__ import annotations

import click

from placer.algorithms.deadline import interrupted
from placer.cli.common import (
    echo_json,
    echo_json_mapping,
    group_label,
    workload_doc,
    workload_text,
    write_mapping_if_asked,
)
from placer.planning.studies.compare import node_ranges
from placer.specs.units import format_bytes, format_duration_us

__all__ = ["print_per_stage_plan"]


def _fmt(value) -> str:
    return "-" if value is None else (f"{value:g}" if isinstance(value, float) else str(value))


def _level(name: str, value) -> str:
    if value is None:
        return "none"
    if name == "latency":
        return format_duration_us(value)
    return _fmt(value)


def print_per_stage_plan(planned, output, as_json) -> int:
    """A plan with a degree per stage (:func:`placer.plan` with ``per_stage_degrees``) as ``placer
    solve`` prints it; the exit code."""
    m, fleet, wl = planned.model, planned.fleet, planned.workload
    ep, reserve = bool(planned.requirements.placement.expert_parallel), planned.requirements.placement.reserve
    for label, why in planned.refused.items():
        click.echo(f"{label} excluded: {why}", err=True)
    r, doc, inst = planned.result, planned.mapping, planned.instance
    done = 130 if r.interrupted or interrupted() else 0
    if done:
        click.echo("interrupted: " + ("best placement so far" if doc is not None else "no placement found yet"),
                   err=as_json)
    tried = ", ".join(map(str, r.stats.get("degrees", ())))
    if doc is None:
        if as_json:
            echo_json({"status": str(r.status), "message": r.message, "lower_bound_devices": r.lower_bound_devices,
                       "workload": workload_doc(wl)})
        else:
            click.echo(f"{m.name} on {fleet.name}, contiguous, degrees {tried} per stage: no placement")
            click.echo(workload_text(wl, fleet=fleet, reserve=reserve))
            click.echo(f"{r.status}: {r.message or 'no placement found'}")
        return done or 1
    where = write_mapping_if_asked(output, doc)
    if as_json:
        return echo_json_mapping(doc, where, done)
    sm = doc["summary"]
    click.echo(f"{m.name} on {fleet.name}, contiguous, degrees {tried} per stage{' (expert parallel)' if ep else ''}: "
               f"{inst.n_nodes} nodes on {sm['devices_used']} devices in {len(doc['stages'])} stages")
    click.echo(workload_text(wl, fleet=fleet, reserve=reserve))
    click.echo(f"devices {sm['devices_used']} (lower bound {_fmt(sm['lower_bound_devices'])}), "
               f"concurrency {wl.concurrency} (ceiling {_fmt(sm['concurrency_ceiling'])}), "
               f"hop latency {format_duration_us(sm['hop_latency_us'])} over {sm['hops']} hops")
    click.echo(f"status {sm['status']} ({'proven' if sm['proven_optimal'] else 'not proven'}), "
               f"{format_duration_us(sm['solve_seconds'] * 1e6)}")
    for level in r.levels:
        click.echo(f"  {level.name}: {_level(level.name, level.value)}, bound {_level(level.name, level.bound)}, "
                   f"{'proven' if level.proven else 'not proven'}")
    click.echo(f"{'stage':>5} {'devices':<11} {'type':<8} {'tp':>3}  {'nodes':<24} {'weights':>10} {'KV':>10} "
               f"{'free':>10} {'max conc':>8} {'next hop':>9}   (bytes per device)")
    names = {x.name: i for i, x in enumerate(inst.nodes)}
    for s in doc["stages"]:
        b = s["bytes"]
        members = s.get("group", {}).get("devices", [s["device"]])
        kind = fleet.by_id[members[0]].type.name
        click.echo(f"{s['index']:>5} {group_label(members):<11} {kind:<8} {len(members):>3}  "
                   f"{node_ranges(inst, [names[n] for n in s['layers']]):<24} {format_bytes(b['weights']):>10} "
                   f"{format_bytes(b['kv_reserve']):>10} {format_bytes(b['free']):>10} "
                   f"{_fmt(s['max_concurrency']):>8} {format_duration_us(s['next_hop_latency_us']):>9}")
    if doc["parallel"].get("per_stage"):
        click.echo("the degrees differ per stage: vLLM, SGLang and Megatron take one degree for every stage "
                   "(vllm-project/vllm#27239) and refuse to export this plan")
    click.echo(where)
    return done
