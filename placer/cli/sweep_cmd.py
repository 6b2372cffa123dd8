from __future__ import annotations

import contextlib
from dataclasses import replace

import click

from placer.cli.common import (
    Progress,
    backend_options,
    echo_json,
    granularity_option,
    hardware_option,
    image_file,
    jobs_option,
    load_inputs,
    method_option,
    output_file,
    quiet_option,
    renamed,
    runtime_option,
    text_only_option,
    time_limit_option,
    warn,
    workload_doc,
    workload_notes,
    workload_text,
)
from placer.cli.traffic_options import traffic_options
from placer.planning.price import price_line
from placer.planning.studies.bands import band_lines
from placer.planning.studies.compare import granularity_for
from placer.planning.studies.sweep import Grid, SweepSettings, run_sweep
from placer.specs.errors import InvalidSpec
from placer.specs.units import format_duration_us, format_tokens, parse_int_list, parse_tokens

# a row's status when the point has no answer (the progress bar counts these as failed)
FAILED_STATUSES = ("error", "unknown")


def parse_references(items) -> dict[str, float]:
    """``("published=59",)`` -> ``{"published": 59.0}``."""
    out = {}
    for item in items:
        label, sep, value = item.rpartition("=")
        try:
            out[label.strip() or value] = float(value)
        except ValueError:
            sep = ""
        if not sep:
            raise InvalidSpec("--reference", "reference", f"expected LABEL=N, got {item!r}")
    return out


def _grid_values(text, flag, parse=int):
    if text is None:
        return None
    try:
        return tuple(parse_int_list(text, parse))
    except ValueError as exc:
        raise InvalidSpec(flag, flag.lstrip("-"), str(exc)) from None


def _modes(text):
    return tuple(m.strip() for m in text.split(",") if m.strip())


@click.command("sweep")
@click.argument("model")
@hardware_option(required=True)
@click.option("--context", "contexts", default=None, metavar="LIST",
              help="Context lengths: a,b,c or lo..hi (e.g. 32k,128k,256k,1M). Default: the model's.")
@click.option("--concurrency", "concurrencies", default=None, metavar="LIST",
              help="Live requests: a,b,c or lo..hi (a range over 64 values steps by powers of two).")
@click.option("--mode", "modes", default="contiguous", show_default=True, help="Modes: contiguous,free,split.")
@click.option("--tp", "tps", default=None, metavar="LIST",
              help="Tensor-parallel degrees, e.g. 1,2,4,8: rows per degree, every stage a group of that many "
                   "devices of one node (default 1).")
@click.option("--weight-bits", default=None, metavar="LIST", help="Weight precisions, e.g. 4,8.")
@click.option("--kv-bits", default=None, metavar="LIST", help="KV-cache precisions, e.g. 8,16.")
@click.option("--budget", default=None, metavar="LIST",
              help="Device budgets: per context and precision, find the largest concurrency that fits by bisection.")
@method_option()
@granularity_option
@time_limit_option("CP-SAT seconds per solve.")
@click.option("--seed", type=int, default=None)
@click.option("--objective", type=click.Choice(["devices", "lex"]), default=None,
              help="CP-SAT objective: devices only (fast; hops not optimised) or devices then hop latency "
                   "(the solver's default).")
@jobs_option
@click.option("--threads", type=click.IntRange(1, 256), default=None,
              help="CP-SAT search threads per solve (default: the solver's).")
@backend_options
@click.option("--racks", type=click.IntRange(1, 100000), default=None, help="Resize the fleet.")
@text_only_option()
@click.option("--replicas", is_flag=True, help="Also report the best replica count per point (see placer plan).")
@click.option("--simulate", is_flag=True,
              help="Simulate every placed point (tokens/s per user, aggregate, per MW); slow at high concurrency.")
@click.option("--sim-tokens", type=click.IntRange(1, 10**6), default=None,
              help="The older name of --osl for --simulate.")
@traffic_options(rate=False)
@click.option("--retry-failed", is_flag=True, help="Solve again points recorded as error or unknown.")
@click.option("-o", "--output", "out", default=None, type=output_file,
              help="Results CSV; rows are appended as points finish and a re-run resumes.")
@click.option("--plot", "plot_path", default=None, type=image_file, metavar="FILE",
              help="Draw the frontier to exactly FILE (PNG, or SVG / PDF by suffix).")
@click.option("--reference", "references", multiple=True, metavar="LABEL=N",
              help="A labelled device count drawn on the --plot figure (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON.")
@runtime_option
@quiet_option
def sweep_command(model, hardware, contexts, concurrencies, modes, tps, weight_bits, kv_bits, budget, method,
                  granularity, time_limit, seed, objective, jobs, workers_deprecated, threads, backend, address, racks, text_only, replicas, simulate,
                  sim_tokens, retry_failed, out, plot_path, references, as_json, quiet, runtime=None, traffic=None):
    """Solve MODEL on HW for every point of a grid of contexts, concurrencies, modes and precisions.

    \b
    With --simulate every point serves the traffic line printed, at its own context and
    concurrency. Default: an 8k-token prompt then 1k output tokens (the public benchmarks'
    8k/1k), the prompt cut to fit the point's context."""
    if traffic.traffic.output_tokens is not None and sim_tokens is not None:
        raise InvalidSpec("--sim-tokens", "sim_tokens", "is the older name of --osl: give one of them")
    sim_tokens = traffic.output_tokens(sim_tokens)
    m, fleet, base = load_inputs(model, hardware, racks=racks, text_only=text_only)
    grid = Grid(contexts=_grid_values(contexts, "--context", parse_tokens) or (base.context_tokens,),
                concurrencies=_grid_values(concurrencies, "--concurrency") or (),
                modes=_modes(modes), weight_bits=_grid_values(weight_bits, "--weight-bits"),
                kv_bits=_grid_values(kv_bits, "--kv-bits"), budgets=_grid_values(budget, "--budget") or (),
                tps=_grid_values(tps, "--tp") or (1,))
    for context in grid.contexts:
        for note in workload_notes(m, base.replace(context_tokens=context)):
            warn(note)
    cap = max(grid.concurrencies) if grid.budgets and grid.concurrencies else None
    settings = SweepSettings(method=method, time_limit=time_limit, seed=seed, objective=objective,
                             granularity=granularity_for("split", granularity), solver_threads=threads,
                             simulate=simulate, simulate_output_tokens=sim_tokens, replicas=replicas,
                             simulate_traffic=traffic.traffic,
                             concurrency_cap=cap, base_workload=base, runtime=runtime,
                             retry_failed=retry_failed)
    bar = Progress(None, "points", quiet=True)     # replaced once the sweep knows its size

    def on_start(todo, reused):
        nonlocal bar
        if reused and not quiet:
            click.echo(f"{reused} point(s) already in {out}; solving {todo}", err=True)
        if todo:
            bar = Progress(todo, "points", quiet=quiet, desc="sweep ")

    def on_point(row, done, todo):
        # a point without an answer: an error, or no placement proven or found in the time limit
        bar.step(failed=row.get("status") in FAILED_STATUSES)

    with contextlib.ExitStack() as stack:
        stack.callback(lambda: bar.close())
        report = run_sweep(m, fleet, grid, settings, out=out, jobs=renamed("--jobs", jobs, workers_deprecated),
                           backend=backend, address=address, on_start=on_start,
                           progress=on_point)
    if plot_path:
        from placer.plotting import plot_frontiers, save

        plot_path = save(plot_frontiers(report.rows, fleet_devices=len(fleet.available),
                                        references=parse_references(references),
                                        title=f"{m.name} on {fleet.name}: devices vs live requests"), plot_path)
    # the simulated columns' traffic: each row's concurrency, live at once, at its context (placer.planning.studies.sweep)
    cached = traffic.traffic.cached_prompt_tokens if traffic.traffic.cached_share is not None else \
        traffic.traffic.cached_prompt_tokens or 0
    traffic = replace(traffic.traffic, output_tokens=sim_tokens, cached_prompt_tokens=cached).to_dict(
        "each row's concurrency") \
        if any(r.get("per_user_tokens_per_s") is not None for r in report.rows) else None
    if as_json:
        echo_json({"rows": report.rows, "workload": workload_doc(base), "traffic": traffic, "solved": report.solved, "reused": report.reused,
                   "seconds": round(report.seconds, 3), "backend": report.backend, "workers": report.jobs,
                   "jobs": report.jobs, "power_boundary": fleet.power_boundary, "pue": fleet.pue})
        return
    click.echo(f"{m.name} on {fleet.name}: {len(report.rows)} points")
    click.echo(workload_text(base, per_row=_varied(grid)))
    _print_table(report.rows, degrees=grid.tps != (1,))
    if traffic is not None:
        click.echo(traffic["text"])
    for line in band_lines(report.rows, lambda r: _label(r, grid)):
        click.echo(line)
    if any(r.get("tokens_per_s_per_mw") is not None for r in report.rows):
        click.echo(f"tok/s/MW: power counted at the {fleet.power_label()} boundary (--power)")
    if any(r.get("aggregate_tokens_per_s") for r in report.rows):
        click.echo(price_line([fleet]))
    click.echo(f"{report.solved} solved, {report.reused} reused in {format_duration_us(report.seconds * 1e6)} "
               f"({report.backend}, {report.jobs} job(s)); * = Pareto-optimal; proven 'devices' = "
               f"device count proven, hop latency not"
               + (f"; results in {out}" if out else "") + (f"; frontier drawn to {plot_path}" if plot_path else ""))


def _varied(grid: Grid) -> tuple[str, ...]:
    """The workload fields the grid sets per row (the rest are the model's defaults)."""
    return (("context",) + ("concurrency",) + (("weight_bits",) if grid.weight_bits else ())
            + (("kv_bits",) if grid.kv_bits else ()))


def _label(r, grid: Grid) -> str:
    """A row by its grid values (those the grid varies): ``32k at 8 live, tp 2, free``."""
    text = f"{format_tokens(r['context_tokens'])} at {r['concurrency']} live"
    if grid.tps != (1,):
        text += f", tp {r.get('tp') or 1}"
    if grid.weight_bits or grid.kv_bits:
        text += f", {r['weight_bits']}/{r['kv_bits']} bits"
    return text + (f", {r['mode']}" if len(grid.modes) > 1 else "")


def _proven(r) -> str:
    """yes: every objective level proven; devices: the device count only; no: neither."""
    if r.get("proven_optimal"):
        return "yes"
    return "devices" if r.get("devices_proven") else "no"


def _print_table(rows, degrees: bool = False):
    sim = any(r.get("per_user_tokens_per_s") is not None for r in rows)
    rep = any(r.get("replicas_best") is not None for r in rows)
    tp = f" {'tp':>3}" if degrees else ""
    head = (f"{'':1} {'mode':<10}{tp} {'context':>7} {'w/kv':>5} {'conc':>6} {'budget':>6} {'devices':>7} {'bound':>5} "
            f"{'hops':>5} {'latency':>9} {'ceiling':>7} {'status':<10} {'proven':<7} {'time':>9}")
    if sim:
        head += f" {'tok/s/user':>10} {'tok/s':>9} {'tok/s/MW':>9} {'$/M tok':>8}"
    if rep:
        head += f" {'replicas':>8} {'total':>5}"
    click.echo(head)

    def v(x, fmt="{}"):
        return "-" if x is None else fmt.format(x)

    for r in rows:
        tp = f" {v(r.get('tp')):>3}" if degrees else ""
        line = (f"{'*' if r.get('pareto') else ' ':1} {r['mode']:<10}{tp} {format_tokens(r['context_tokens']):>7} "
                f"{str(r['weight_bits']) + '/' + str(r['kv_bits']):>5} {v(r['concurrency']):>6} "
                f"{v(r['budget_devices']):>6} {v(r['devices_used']):>7} {v(r['lower_bound_devices']):>5} "
                f"{v(r['hops']):>5} {format_duration_us(r['hop_latency_us']):>9} {v(r['concurrency_ceiling']):>7} "
                f"{r['status'] or '-':<10} {_proven(r):<7} {format_duration_us(None if r['seconds'] is None else r['seconds'] * 1e6):>9}")
        if sim:
            line += (f" {v(r['per_user_tokens_per_s'], '{:.0f}'):>10} {v(r['aggregate_tokens_per_s'], '{:.0f}'):>9}"
                     f" {v(r['tokens_per_s_per_mw'], '{:.0f}'):>9} {v(r.get('usd_per_million_tokens'), '{:.3f}'):>8}")
        if rep:
            line += f" {v(r['replicas_best']):>8} {v(r['replicas_total_devices']):>5}"
        if r.get("error") and r["status"] not in ("optimal", "feasible", "heuristic"):
            line += f"  ({r['error']})"
        click.echo(line)
