from __future__ import annotations

import click

from ..algorithms import METHODS
from ..compare import node_ranges, solution_path, solve
from ..instance import MODES
from ..units import format_bytes
from .common import echo_json, hardware_option, load_inputs, workload_options

PLACING_METHODS = [m for m in METHODS if m != "bound"]


def _fmt(value, unit: str = "") -> str:
    return "-" if value is None else f"{value:g}{unit}" if isinstance(value, float) else f"{value}{unit}"


def print_progress(info) -> None:
    """One line on stderr per solver report: current best, bound, elapsed seconds."""
    if isinstance(info, dict):
        best = info.get("best", info.get("objective"))
        bound = info.get("bound")
        elapsed = info.get("elapsed", info.get("seconds"))
        parts = [f"best {_fmt(best)}", f"bound {_fmt(bound)}"]
        if elapsed is not None:
            parts.append(f"{float(elapsed):.1f} s")
        extra = info.get("message") or info.get("phase")
        if extra:
            parts.append(str(extra))
        click.echo("cpsat: " + ", ".join(parts), err=True)
    else:
        click.echo(f"cpsat: {info}", err=True)


@click.command("solve")
@click.argument("model")
@hardware_option(required=True)
@click.option("--mode", type=click.Choice(MODES), default=None,
              help="contiguous (default; free for typepack and ffd), free, or split.")
@click.option("--granularity", default=None,
              help="Split mode's refinement: layer, block or shards:N (default shards:4).")
@click.option("--method", type=click.Choice(PLACING_METHODS), default="cpsat", show_default=True)
@click.option("--pin", "pins", multiple=True, metavar="SPEC",
              help="N=DEVICE or NAME=DEVICE (node on a device), A-B (layers on one device); repeatable.")
@workload_options
@click.option("--time-limit", type=click.FloatRange(0, min_open=True), default=30.0, show_default=True,
              help="CP-SAT time limit in seconds.")
@click.option("--seed", type=int, default=0, show_default=True, help="CP-SAT random seed.")
@click.option("--workers", type=click.IntRange(1, 256), default=2, show_default=True, help="CP-SAT workers.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Mapping file (default solutions/<model>__<hardware>__<mode>.json).")
@click.option("--json", "as_json", is_flag=True, help="Print the stage mapping as JSON.")
@click.option("--no-write", is_flag=True, help="Do not write the mapping file.")
def solve_command(model, hardware, mode, granularity, method, pins, time_limit, seed, workers, output,
                  as_json, no_write, **kw):
    """Place MODEL on the --hardware fleet: fewest devices, then least hop latency.

    Prints the stages and a summary and writes the stage mapping. An impossible request prints
    the reason and the largest concurrency that fits, writes nothing and exits 1.
    """
    m, fleet, wl = load_inputs(model, hardware, **kw)
    opts = dict(time_limit=time_limit, seed=seed, workers=workers, progress=print_progress) \
        if method == "cpsat" else {}
    solved = solve(m, fleet, wl, mode=mode, granularity=granularity, method=method, pins=pins, **opts)
    inst, r, doc = solved.instance, solved.result, solved.mapping
    if doc is None:
        if as_json:
            echo_json({"status": str(r.status), "message": r.message, "max_concurrency": r.max_concurrency,
                       "lower_bound_devices": r.lower_bound_devices})
        elif r.status == "infeasible":
            # why, in bytes, and what would fit (placer.explain; bounded by the solve's time limit)
            from ..explain import explain_infeasible
            click.echo(explain_infeasible(inst, time_limit=min(time_limit, 20.0)))
        else:
            click.echo(f"{r.status}: {r.message or 'no placement found'}")
            if r.max_concurrency is not None:
                click.echo(f"largest feasible concurrency: {r.max_concurrency} "
                           f"(asked for {wl.concurrency})")
        return 1
    path = output or solution_path(m.name, fleet.name, inst.mode)
    if not no_write:
        from ..mapping import write_mapping
        write_mapping(path, doc)
    if as_json:
        echo_json(doc)
        if not no_write:
            click.echo(f"wrote {path}", err=True)
        return 0
    click.echo(f"{m.name} on {fleet.name}, {inst.mode} ({inst.model.granularity}), method {method}: "
               f"{inst.n_nodes} nodes, concurrency {wl.concurrency}")
    click.echo(f"{'stage':>5} {'device':<8} {'rack':>4}  {'nodes':<28} {'weights':>10} {'KV':>10} "
               f"{'state':>10} {'free':>10} {'max conc':>8} {'next hop':>9}")
    names = {x.name: i for i, x in enumerate(inst.nodes)}
    for s in doc["stages"]:
        b = s["bytes"]
        nodes = node_ranges(inst, [names[n] for n in s["layers"]])
        hop = s["next_hop_latency_us"]
        click.echo(f"{s['index']:>5} {s['device']:<8} {s['rack']:>4}  {nodes:<28} "
                   f"{format_bytes(b['weights']):>10} "
                   f"{format_bytes(b['kv_reserve']):>10} {format_bytes(b['state']):>10} "
                   f"{format_bytes(b['free']):>10} {_fmt(s['max_concurrency']):>8} "
                   f"{'-' if hop is None else f'{hop:g} us':>9}")
    sm = doc["summary"]
    proven = "proven" if sm["proven_optimal"] else "not proven"
    levels = r.stats.get("levels") or {}
    # with per-level figures below, a single device gap would read as "0% from optimal"
    gap = "" if sm.get("gap") is None or levels else f", gap {sm['gap']:.1%}"
    click.echo(f"devices {sm['devices_used']} (lower bound {_fmt(sm['lower_bound_devices'])}), "
               f"hops {sm['hops']}, "
               f"hop latency {_fmt(sm['hop_latency_us'], ' us')}, concurrency ceiling "
               f"{_fmt(sm['concurrency_ceiling'])}")
    click.echo(f"status {sm['status']} ({proven}{gap}), {sm['solve_seconds']:.2f} s")
    for name, level in levels.items():
        unit = " us" if name == "latency" else ""
        value = "-" if level.get("value") is None else f"{level['value']:g}{unit}"
        bound = "none" if level.get("bound") is None else f"{level['bound']:g}{unit}"
        click.echo(f"  {name}: {value}, bound {bound}, {'proven' if level.get('proven') else 'not proven'}")
    if r.stats.get("latency_proven") is False:
        click.echo("hop latency: best path found, not proven minimal")
    if not no_write:
        click.echo(f"wrote {path}")
    return 0
