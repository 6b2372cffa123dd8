"""``placer compare --disagg``: how each method places the pools of a disaggregated plan (printing only)."""

from __future__ import annotations

import click

from placer.cli.common import Progress, echo_json, workload_doc, workload_text
from placer.planning.studies.compare_pools import POOL_METHODS, compare_pools
from placer.specs.units import format_duration_us


def print_pool_comparison(m, fleet, wl, req, solver, *, as_json: bool, quiet: bool) -> int:
    with Progress(2 * len(POOL_METHODS), "rows", quiet=quiet, desc="compare ", failures=False) as bar:
        started = []

        def progress(pool, method):
            if started:
                bar.step()
            started.append(method)
            bar.describe(f"compare: {pool} / {method} ")

        doc = compare_pools(m, fleet, wl, req, solver, progress=progress)
        bar.step()
    doc["workload"] = workload_doc(wl)
    plan = doc["plan"]
    if as_json:
        echo_json(doc)
        return 0 if plan["feasible"] else 1
    click.echo(f"{m.name} on {fleet.name}, disaggregated: {plan['message']}")
    click.echo(workload_text(wl))
    click.echo(doc["traffic"]["text"])
    if not plan["feasible"]:
        return 1
    for what, key in (("TPOT", "error_band"), ("TTFT", "prefill_error_band")):
        if plan.get(key):
            click.echo(f"{what}: {plan[key]}")
    click.echo(f"{'pool':<8} {'replicas':>8} {'layout':<18} {'method':<9} {'devices':>8} {'bound':>6} "
               f"{'plan total':>10} {'proven':>6} {'time':>9}")
    for r in doc["pools"]:
        per = "-" if r["devices_per_replica"] is None else str(r["devices_per_replica"])
        mark = "*" if r.get("devices_proven") else " "
        bound = "-" if r["lower_bound_devices"] is None else str(r["lower_bound_devices"] * r["tp"])
        total = "-" if r["plan_devices"] is None else str(r["plan_devices"])
        proven = "yes" if r["proven_optimal"] else "no"
        click.echo(f"{r['pool']:<8} {r['replicas']:>8} {r['layout']:<18} {r['method']:<9} {per + mark:>8} {bound:>6} "
                   f"{total:>10} {proven:>6} {format_duration_us(r['seconds'] * 1e6):>9}")
    click.echo("devices: one replica of the pool placed by the method (* proven minimal); plan total: both pools' "
               "replicas as the plan counts them, this pool placed by the method")
    return 0
