from __future__ import annotations

import click

from ..compare import COMPARE_ROWS, compare
from ..units import format_duration_us
from .common import (
    Progress,
    echo_json,
    granularity_option,
    hardware_option,
    load_inputs,
    quiet_option,
    renamed,
    threads_option,
    time_limit_option,
    workload_doc,
    workload_options,
    workload_text,
)


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


@click.command("compare")
@click.argument("model")
@hardware_option(required=True)
@workload_options
@granularity_option
@time_limit_option("CP-SAT time limit per row, in seconds.")
@click.option("--seed", type=int, default=0, show_default=True, help="CP-SAT random seed.")
@threads_option
@click.option("--json", "as_json", is_flag=True, help='Print {"rows": [...]}.')
@quiet_option
def compare_command(model, hardware, granularity, time_limit, seed, threads, workers_deprecated, as_json, quiet,
                    **kw):
    """Every method in every mode it places in, side by side: the published rule and first-fit
    decreasing (free), greedy and the exact DP (contiguous), CP-SAT (contiguous, free, split) and
    the lower bounds."""
    threads = renamed("--threads", threads, workers_deprecated, default=2)
    m, fleet, wl = load_inputs(model, hardware, **kw)

    with Progress(len(COMPARE_ROWS), "rows", quiet=quiet, desc="compare ", failures=False) as bar:
        started = []

        def progress(method, mode):
            if started:
                bar.step()
            started.append((method, mode))
            bar.describe(f"compare: {method} / {mode} ")
            if bar.bar is None and not quiet and not as_json:
                # no terminal to draw a bar on (a log, a pipe): one line per row as it starts
                click.echo(f"solving {method} / {mode} ...", err=True)

        doc = compare(m, fleet, wl, time_limit=time_limit, seed=seed, workers=threads, granularity=granularity,
                      progress=progress)
        bar.step()
    doc["workload"] = workload_doc(wl)
    done = 130 if doc.get("interrupted") else 0    # Ctrl-C: the rows so far, then exit 130
    if done:
        click.echo("interrupted: the rows solved so far", err=as_json)
    if as_json:
        echo_json(doc)
        return done
    click.echo(f"{m.name} on {fleet.name}: every method in every mode it places in")
    click.echo(workload_text(wl))
    # "proven": devices and hop latency both proven; "devices" column marks a proven count with "*"
    head = ("method", "mode", "devices", "hops", "latency", "ceiling", "bound", "proven", "status", "time")
    click.echo(f"{head[0]:<9} {head[1]:<15} {head[2]:>8} {head[3]:>5} {head[4]:>8} {head[5]:>7} {head[6]:>5} "
               f"{head[7]:>6}  {head[8]:<10} {head[9]:>9}")
    notes = []
    for r in doc["rows"]:
        mode = r["mode"] if r["mode"] != "split" else f"split/{r['granularity']}"
        bound_only = r["method"] == "bound"
        proven = "-" if bound_only else _cell(r["proven_optimal"])
        status = "bound" if bound_only and r["status"] == "unknown" else r["status"]
        devices = _cell(r["devices_used"]) + ("*" if r.get("devices_proven") and not bound_only else " ")
        click.echo(f"{r['method']:<9} {mode:<15} {devices:>8} {_cell(r['hops']):>5} "
                   f"{format_duration_us(r['hop_latency_us']):>8} {_cell(r['concurrency_ceiling']):>7} "
                   f"{_cell(r['lower_bound_devices']):>5} {proven:>6}  {status:<10} {format_duration_us(r['seconds'] * 1e6):>9}")
        if r["message"] and r["status"] in ("infeasible", "unknown") and r["method"] != "bound":
            notes.append(f"{r['method']} / {r['mode']}: {r['message']}")
    click.echo("* device count proven minimal (it meets the lower bound or the solver proved it); "
               "proven = devices and hop latency both proven")
    for note in notes:
        click.echo(note)
    return done
