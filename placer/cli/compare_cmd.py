from __future__ import annotations

import click

from placer.cli.common import (
    Progress,
    echo_json,
    granularity_option,
    hardware_option,
    load_inputs,
    parse_degrees,
    quiet_option,
    renamed,
    reserve_of,
    runtime_option,
    stopped,
    threads_option,
    time_limit_option,
    workload_doc,
    workload_options,
    workload_text,
)
from placer.cli.solve_disagg import disagg_options, disagg_pools
from placer.cli.traffic_options import reserved_context, traffic_options
from placer.planning import Placement, Requirements, SolverSettings, Targets
from placer.planning.studies.bands import band_lines
from placer.planning.studies.compare import COMPARE_ROWS, compare, compare_degrees
from placer.problem.reductions.tensor_parallel import has_gpus
from placer.specs.errors import InvalidSpec
from placer.specs.units import format_duration_us


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
@click.option("--tp", "tp", default=None, metavar="LIST",
              help="Tensor-parallel degrees of the per-degree table, e.g. 1,2,4,8. Default on GPU fleets: the "
                   "divisors of the node size the model's heads allow (no table on wafer fleets).")
@click.option("--ep/--no-ep", "ep", default=None,
              help="Per-degree table: only expert parallelism (--ep) or only tensor-split experts (--no-ep). "
                   "Default: both on an MoE model.")
@click.option("--reserve", default=None, metavar="R",
              help="Memory held back on every device for the runtime (0.1, 8 GB, 0.1+3.5GB). Default: the "
                   "hardware spec's.")
@click.option("--attention-dp", "attention_dp", is_flag=True,
              help="Per-degree table: also attention data parallelism (requests split over a stage's group, "
                   "experts spread whole; rows marked dp).")
@traffic_options(rate=True, decode_only=True)
@click.option("--degrees-only", is_flag=True, help="Only the per-degree table (skip the methods).")
@click.option("--max-ttft-ms", type=float, default=None, metavar="MS",
              help="Per degree, whether the loaded run's p99 time to first token meets MS (meets_ttft).")
@runtime_option
@click.option("--json", "as_json", is_flag=True, help='Print {"rows": [...], "degrees": [...]}.')
@disagg_options
@click.option("--max-itl-ms", type=float, default=None, metavar="MS",
              help="With --disagg: the decode pool's TPOT target.")
@click.option("--min-user-tps", type=float, default=None, metavar="X",
              help="With --disagg: the TPOT target as tokens/s per user.")
@quiet_option
def compare_command(model, hardware, granularity, time_limit, seed, threads, workers_deprecated, tp, ep, reserve,
                    degrees_only, as_json, quiet, runtime=None, max_ttft_ms=None,
                    attention_dp=False, disagg=False, prefill_hardware=None, traffic=None,
                    max_itl_ms=None, min_user_tps=None, **kw):
    """Every method in every mode it places in, side by side: the published rule and first-fit
    decreasing (free), greedy and the exact DP (contiguous), CP-SAT (contiguous, free, split) and
    the lower bounds. On a GPU fleet (or with --tp) also one row per tensor-parallel degree (and
    expert parallelism on MoE models): the proven fewest GPUs, the guaranteed concurrency and the
    simulated speed of one user alone and of the workload's concurrency. With --runtime only the
    per-degree rows, each solved under the runtime's rules (the methods' table compares the
    published rule and the heuristics, which know no runtime).

    \b
    Speeds are for the traffic line printed above them. Default traffic: the model spec's
    default_traffic, else an 8k-token prompt then 1k output tokens (the public benchmarks' 8k/1k),
    the prompt cut to fit --context."""
    decode_only, cached_prompt = traffic.decode_only, traffic.traffic.cached_prompt_tokens
    if traffic.traffic.cached_share is not None:
        cached_prompt = traffic.traffic.cached_share
    threads = renamed("--threads", threads, workers_deprecated, default=2)
    degrees_only = degrees_only or runtime is not None
    if not disagg and (max_itl_ms is not None or min_user_tps is not None):
        flag = "--max-itl-ms" if max_itl_ms is not None else "--min-user-tps"
        raise InvalidSpec(flag, flag.lstrip("-").replace("-", "_"), "applies to --disagg (the decode pool's TPOT)")
    if decode_only and disagg:
        raise InvalidSpec("--decode-only", "decode_only", "applies to the per-degree table, not --disagg")
    if decode_only and cached_prompt is not None:
        raise InvalidSpec("--cached-prompt", "cached_prompt", "applies to prefill; --decode-only has none")
    if decode_only and max_ttft_ms is not None:
        raise InvalidSpec("--max-ttft-ms", "max_ttft_ms", "a time to first token needs prefill; --decode-only has none")
    kw["context"] = reserved_context(kw.get("context"), traffic)
    m, fleet, wl = load_inputs(model, hardware, **kw)
    resolved, isl, output_tokens = traffic.resolved(m, wl.context_tokens)
    degrees = parse_degrees(tp)
    solver = SolverSettings(time_limit=time_limit, seed=seed, threads=threads)
    placement = Placement(degrees=degrees, expert_parallel=True if ep else None if ep is None else False,
                          reserve=reserve_of(reserve), runtime=runtime, attention_dp=True if attention_dp else None)
    if disagg:
        from placer.cli.compare_pools import print_pool_comparison

        req = Requirements(placement,
                           Targets(max_ttft_ms=max_ttft_ms, max_itl_ms=max_itl_ms, min_user_tps=min_user_tps,
                                   output_tokens=output_tokens),
                           pools=disagg_pools(fleet, disagg, prefill_hardware, traffic.rate, isl, output_tokens),
                           traffic=resolved)
        return print_pool_comparison(m, fleet, wl, req, solver, as_json=as_json, quiet=quiet)
    # the methods' table places whole models at one device per stage: the split refinement is its only requirement
    methods_req = Requirements(Placement(granularity=granularity))
    if traffic.rate is not None:
        raise InvalidSpec("--rate", "rate", "applies to --disagg plans (the per-degree table is a closed loop at "
                                            "--concurrency)")
    degrees_req = Requirements(placement, Targets(cached_prompt_tokens=traffic.cached_tokens or 0,
                                                  output_tokens=output_tokens), traffic=resolved)
    gpus = has_gpus(fleet)
    per_degree = gpus or degrees is not None or ep is not None or degrees_only
    if degrees_only or not per_degree:
        doc = _degrees(m, fleet, wl, degrees_req, solver, output_tokens, max_ttft_ms, quiet, as_json, decode_only) \
            if degrees_only \
            else _methods(m, fleet, wl, methods_req, solver, quiet, as_json)
    else:
        doc = _methods(m, fleet, wl, methods_req, solver, quiet, as_json)
        if not doc.get("interrupted"):
            doc.update(_degrees(m, fleet, wl, degrees_req, solver, output_tokens, max_ttft_ms, quiet, as_json,
                                decode_only))
    doc["workload"] = workload_doc(wl)
    doc["power_boundary"], doc["pue"] = fleet.power_boundary, fleet.pue    # of every power figure in the rows
    done = stopped(doc, "rows", err=as_json)       # Ctrl-C: the rows so far, then exit 130
    if as_json:
        echo_json(doc)
        return done
    if "rows" in doc:
        _print_methods(m, fleet, wl, doc)
    if "degrees" in doc:
        if "rows" in doc:
            click.echo("")
        _print_degrees(m, fleet, wl, doc, output_tokens, "rows" not in doc)
    return done


def _methods(m, fleet, wl, req, solver, quiet, as_json) -> dict:

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

        doc = compare(m, fleet, wl, req, solver, progress=progress)
        bar.step()
    return doc


def _print_methods(m, fleet, wl, doc) -> None:
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


def _degrees(m, fleet, wl, req, solver, output_tokens, max_ttft_ms, quiet, as_json, decode_only=False) -> dict:
    with Progress(None, "degrees", quiet=quiet, desc="degrees ", failures=False) as bar:
        started = []

        def progress(g, expert):
            if started:
                bar.step()
            started.append(g)
            label = f"tp {g}" + (", attention-dp" if expert == "dp" else ", ep" if expert else "")
            bar.describe(f"compare: {label} ")
            if bar.bar is None and not quiet and not as_json:
                click.echo(f"solving {label} ...", err=True)

        doc = compare_degrees(m, fleet, wl, req, solver, output_tokens=output_tokens, max_ttft_ms=max_ttft_ms,
                              decode_only=decode_only,
                              progress=progress)
        bar.step()
    return doc


def _degree_label(r) -> str:
    """A per-degree row by name: ``tp 4``, ``tp 4 ep``, ``tp 4 dp``."""
    return f"tp {r['tp']}" + (" dp" if r.get("attention_dp") else " ep" if r["ep"] > 1 else "")


def _speed(x) -> str:
    return "-" if x is None else f"{x:,.1f}"


def _print_degrees(m, fleet, wl, doc, output_tokens, header) -> None:
    unit = "GPUs" if has_gpus(fleet) else "devices"
    if header:
        click.echo(workload_text(wl))
    live = {r["live_requests"] for r in doc["degrees"] if r["live_requests"]}
    at = f"{live.pop()} live" if len(live) == 1 else "the live requests shown"
    click.echo(f"{m.name} on {fleet.name}, per tensor-parallel degree (contiguous; simulated: each request "
               f"{'decodes' if doc['traffic']['shape'] == 'decode_only' else 'prefills its prompt then decodes'} "
               f"{output_tokens} tokens, one user alone and {at}):")
    click.echo(doc["traffic"]["text"])
    head = ("tp", "ep", unit, "stages", "ceiling", "latency", "proven", "one user", "per user", "aggregate", "time")
    click.echo(f"{head[0]:>3} {head[1]:>3} {head[2]:>7} {head[3]:>6} {head[4]:>7} {head[5]:>8} {head[6]:>6} "
               f"{head[7]:>9} {head[8]:>9} {head[9]:>10} {head[10]:>9}")
    notes = []
    for r in doc["degrees"]:
        devices = _cell(r["devices_used"]) + ("*" if r["devices_proven"] and r["devices_used"] else " ")
        ep = "dp" if r.get("attention_dp") else "-" if r["ep"] == 1 else str(r["ep"])
        click.echo(f"{r['tp']:>3} {ep:>3} {devices:>7} {_cell(r['stages']):>6} {_cell(r['concurrency_ceiling']):>7} "
                   f"{format_duration_us(r['hop_latency_us']):>8} {_cell(r['proven_optimal']):>6} "
                   f"{_speed(r['alone_tokens_per_s']):>9} {_speed(r['per_user_tokens_per_s']):>9} "
                   f"{_speed(r['aggregate_tokens_per_s']):>10} {format_duration_us(r['seconds'] * 1e6):>9}")
        if r["devices_used"] is None:
            groups = f" (devices here are groups of {r['tp']})" if r["tp"] > 1 else ""
            notes.append(f"tp {r['tp']}{', ep' if r['ep'] > 1 else ''}: {r['status']}{groups}: {r['message']}")
    click.echo(f"* {unit} count proven minimal at that degree; latency: the hops between stages plus the link latency "
               "of the groups' all-reduces and all-to-alls; one user / per user / aggregate: simulated tokens/s "
               "(placer simulate's cost model, collectives over the node's links)")
    rows = doc["degrees"]
    same = all(r.get("alone_error_band") == r.get("error_band") for r in rows)
    keys = (("error_band", "speeds"),) if same else (("alone_error_band", "one user's speeds"),
                                                      ("error_band", "per-user and aggregate speeds"))
    for key, what in keys:
        for line in band_lines(rows, _degree_label, key=key, what=what):
            click.echo(line)
    for r in doc["refused"]:
        kind = f", {r['ep']}" if isinstance(r["ep"], str) else ", ep" if r["ep"] else ""
        notes.append(f"tp {r['tp']}{kind} excluded: {r['reason']}")
    for note in notes:
        click.echo(note)
