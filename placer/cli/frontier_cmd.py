from __future__ import annotations

import click

from placer.cli.common import (
    Progress,
    backend_options,
    context_type,
    drafts_with_mtp,
    echo_json,
    granularity_option,
    jobs_option,
    load_fleet_chosen,
    method_option,
    output_file,
    parallel_options,
    parse_degrees,
    power_options,
    quiet_option,
    renamed,
    reserve_of,
    runtime_option,
    spec_decoding,
    speculative_options,
    text_only_option,
    time_limit_option,
    warn_workload,
    workload_doc,
    workload_text,
)
from placer.cli.traffic_options import reserved_context, traffic_options
from placer.planning import Placement, Requirements, SolverSettings, Targets
from placer.planning.price import price_line
from placer.planning.studies.bands import band_lines
from placer.problem.instance import MODES
from placer.simulate.per_user import AGGREGATE_PER_LIVE_MEANING, PER_USER_MEANING, with_aggregate_per_live
from placer.specs.errors import InvalidSpec
from placer.specs.units import plural


def _speeds(text: str) -> tuple[float, ...]:
    try:
        vals = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise InvalidSpec("--speeds", "speeds", f"cannot read {text!r}: give tokens/s per user, e.g. 1000,500,100") \
            from None
    if any(not v > 0 for v in vals):
        raise InvalidSpec("--speeds", "speeds", "every speed must be a positive number of tokens/s")
    return vals


@click.command("frontier")
@click.argument("model")
@click.option("--hardware", "-H", "hardware", required=True, metavar="A,B,...",
              help="Fleets to compare, comma-separated catalog names or spec files.")
@click.option("--context", type=context_type, default=None, help="Tokens per request (default: the model's).")
@click.option("--weight-bits", type=click.IntRange(1, 64), default=None,
              help="Every weight at this many bits (default: as the spec or checkpoint stores them).")
@text_only_option()
@click.option("--kv-bits", type=click.IntRange(1, 64), default=None)
@click.option("--speeds", default="1000,500,100", show_default=True,
              help="Per-user speed floors (tokens/s) to compare the platforms at.")
@click.option("--mode", type=click.Choice(MODES), default="contiguous", show_default=True)
@granularity_option
@method_option()
@time_limit_option("CP-SAT time limit per placement.")
@click.option("--threads", type=click.IntRange(1, 256), default=None, help="CP-SAT search threads per solve (default 2).")
@jobs_option
@backend_options
@parallel_options
@click.option("--max-target", type=click.IntRange(1, 2**30), default=None, metavar="N",
              help="Largest per-replica concurrency a placement is solved for (targets 1, 2, 4, ... up to N; "
                   "default: up to what the fleet holds).")
@click.option("-o", "--output", type=output_file, default=None, metavar="FILE",
              help="Write the CSV of every simulated point (Pareto points marked) to FILE.")
@click.option("--plot", type=output_file, default=None, metavar="FILE",
              help="Draw to FILE (PNG): one curve per platform, tokens/s per MW and per device against "
                   "tokens/s per user.")
@click.option("--json", "as_json", is_flag=True, help="Print the points and sentences as JSON.")
@click.option("--max-ttft-ms", type=float, default=None, metavar="MS",
              help="Points whose p99 time to first token (closed loop with chunked prefill) exceeds MS stay "
                   "in the CSV but leave the Pareto sets and the answers.")
@runtime_option
@speculative_options
@traffic_options(rate=False)
@click.option("--disagg", is_flag=True,
              help="Also plan, per fleet and per --speeds floor, the disaggregated pools serving the most "
                   "requests/s under that TPOT and --max-ttft-ms (required), prefill on the same fleet and on "
                   "--prefill-hardware; each pairing is a platform of its own.")
@click.option("--prefill-hardware", default=None, metavar="HW",
              help="With --disagg: a second fleet for the prefill pool, paired with every --hardware fleet.")
@click.option("--prefill-racks", type=click.IntRange(1, 100000), default=None, metavar="N",
              help="With --prefill-hardware: resize the prefill fleet to N racks (nodes).")
@click.option("--sim", "sim", type=click.Choice(("fast", "exact")), default="fast", show_default=True,
              help="How each point is simulated: fast (the event run's schedule without its per-visit events, "
                   "placer.simulate.steady; the event run where it does not apply) or exact (the event run). "
                   "The CSV's sim column says which ran.")
@power_options
@quiet_option
def frontier_command(model, hardware, context, weight_bits, text_only, kv_bits, speeds, mode, granularity, method, time_limit,
                     threads, jobs, workers_deprecated, backend, address, tp, ep, reserve, max_target, output, plot,
                     as_json, quiet, runtime=None, max_ttft_ms=None, spec_tokens=None, spec_method=None, draft_model=None,
                     spec_accept=None, traffic=None, disagg=False, prefill_hardware=None, prefill_racks=None,
                     sim="fast"):
    """Per fleet, the Pareto set of (tokens/s per user, tokens/s per MW, tokens/s per device) over
    placements, tensor-parallel degrees (GPU fleets; --tp, default every degree the model's heads
    and the node size allow; MoE models also with experts spread whole, --ep only those), replicas
    and live requests, each point a validated placement and its simulation; writes the CSV (with
    each point's degree) and the PNG and says, per requested speed, which platform is ahead and by
    what ratio. Every point is for the traffic line printed (and each CSV row's traffic column).

    \b
    Default traffic: the model spec's default_traffic, else an 8k-token prompt then 1k output
    tokens (the public benchmarks' 8k/1k), the prompt cut to fit --context; closed loop at each
    point's live load. --isl/--osl without --context reserve the longest request."""
    from placer.planning.studies.frontier import FrontierGrid, speed_frontier, write_csv
    from placer.specs.model import load_model
    from placer.specs.workload import workload_for

    floors = _speeds(speeds)
    refs = [h.strip() for h in hardware.split(",") if h.strip()]
    if not refs:
        raise InvalidSpec("--hardware", "hardware", "name at least one fleet")
    if prefill_hardware is not None and not disagg:
        raise InvalidSpec("--prefill-hardware", "prefill_hardware", "applies to --disagg")
    if disagg and max_ttft_ms is None:
        raise InvalidSpec("--max-ttft-ms", "max_ttft_ms", "--disagg plans its pools for a TTFT target: give it")
    m = load_model(model, text_only=text_only, mtp=drafts_with_mtp(spec_tokens, draft_model, spec_method))
    fleets = [load_fleet_chosen(h) for h in refs]
    if prefill_racks is not None and prefill_hardware is None:
        raise InvalidSpec("--prefill-racks", "prefill_racks", "resizes --prefill-hardware: give it")
    prefill_fleet = None if prefill_hardware is None else load_fleet_chosen(prefill_hardware, racks=prefill_racks)
    where = fleets[0].power_label()
    wl = workload_for(m, context=reserved_context(context, traffic), weight_bits=weight_bits, kv_bits=kv_bits)
    warn_workload(m, wl, kv_bits)
    resolved, _isl, output_tokens = traffic.resolved(m, wl.context_tokens)
    jobs = renamed("--jobs", jobs, workers_deprecated)
    bar = [None]                 # the CLI's progress bar, made once the points are known

    def progress(done, total):
        if bar[0] is None:
            bar[0] = Progress(total, "points", quiet=quiet, desc="frontier ", failures=False)
        bar[0].step()

    req = Requirements(Placement(mode=mode, granularity=granularity, degrees=parse_degrees(tp),
                                 expert_parallel=True if ep else None, reserve=reserve_of(reserve), runtime=runtime),
                       Targets(cached_prompt_tokens=traffic.cached_tokens or 0, output_tokens=output_tokens),
                       spec_decoding(spec_tokens, spec_method, draft_model, spec_accept), traffic=resolved)
    # min_devices passes the time limit and threads to CP-SAT only
    solver = SolverSettings(method=method, time_limit=time_limit, threads=threads or 2)
    grid = FrontierGrid(speeds=floors, output_tokens=output_tokens, max_target=max_target, max_ttft_ms=max_ttft_ms,
                        disagg=disagg, prefill_fleet=prefill_fleet, sim=sim)
    try:
        rep = speed_frontier(m, fleets, wl, req, solver, grid, jobs=jobs, backend=backend, address=address,
                             progress=progress)
    finally:
        if bar[0] is not None:
            bar[0].close()
    # files only where a flag says (-o, --plot)
    if output:
        write_csv(output, rep.rows)
    if plot:
        from placer.plotting import plot_speed_frontiers, save

        save(plot_speed_frontiers(rep.rows, speeds=floors, title=f"{m.name}, {wl.context_tokens:,}-token context, "
                                                                  f"{wl.weight_bits}-bit weights, power at the "
                                                                  f"{where} boundary\n{_short(resolved)}\n"
                                                                  f"{_plot_band(rep.rows)}"), plot)
    written = [str(p) for p in (output, plot) if p]
    # both per-user figures, named (placer.simulate.per_user): the mean request rate and aggregate / live
    rows = [with_aggregate_per_live(r) for r in rep.rows]
    traffic = resolved
    if as_json:
        echo_json(dict(model=rep.model, context_tokens=rep.context_tokens, platforms=rep.platforms,
                       sentences=rep.sentences, notes=rep.notes, rows=rows,
                       figures=dict(per_user_tokens_per_s=PER_USER_MEANING,
                                    aggregate_per_live_tokens_per_s=AGGREGATE_PER_LIVE_MEANING),
                       traffic=traffic.to_dict("each point's live load"),
                       csv=str(output) if output else None, png=str(plot) if plot else None,
                       workload=workload_doc(wl), power_boundary=fleets[0].power_boundary, pue=fleets[0].pue,
                       prices=price_line(fleets)))
        return 0
    _print_text(rep, rows, m, wl, fleets, reserve, traffic, written)
    return 0


def _plot_band(rows) -> str:
    """The calibration's error bands of the Pareto points in a plot title (each without its point
    counts, up to three), else where to read each point's."""
    bands = list(dict.fromkeys(r["error_band"] for r in rows if r.get("pareto") and r.get("error_band")))
    if not bands:
        return ""
    if len(bands) > 3:
        return "speeds' calibrated error: per point in the CSV's error_band column"
    return "speeds: " + "; ".join(b.split(" (worst of")[0] for b in bands)


def _short(traffic) -> str:
    """The traffic in a plot title: ``traffic: each a 8,192-token prompt (0 cached) then 1,024 output tokens``."""
    return "traffic: " + traffic.request_text()


def _print_text(rep, rows, m, wl, fleets, reserve, traffic, written) -> None:
    """The frontier as text: what was swept, the traffic, the power boundary, and per platform the
    ends of its Pareto set, then the sentences and notes."""
    where = fleets[0].power_label()
    n_front = sum(1 for r in rep.rows if r.get("pareto"))
    click.echo(f"{m.name} at {wl.context_tokens:,} tokens of context on {', '.join(rep.platforms)}: "
               f"{len(rep.rows)} simulated points, {n_front} Pareto-optimal")
    click.echo(workload_text(wl, concurrency="per point (the live loads swept)", reserve=reserve_of(reserve)))
    click.echo(traffic.describe("each point's live load"))
    click.echo(f"power counted at the {where} boundary (--power)")
    ran = [r.get("sim") for r in rep.rows if r.get("sim")]
    if ran:
        fast = ran.count("steady")
        click.echo(f"simulated by the fast path (--sim fast) at {fast} of {len(ran)} points, by the event run at "
                   f"{len(ran) - fast}" if fast else f"simulated by the event run at all {len(ran)} points")
    if reserve is None:
        from placer.cli.common import reserve_text
        for f in fleets:
            click.echo(f"  runtime reserve on {f.name}: {reserve_text(f)}")
    click.echo(f"tokens/s per user: the {PER_USER_MEANING}; aggregate / live: the {AGGREGATE_PER_LIVE_MEANING}")
    for p in rep.platforms:
        front = sorted((r for r in rows if r["platform"] == p and r.get("pareto")),
                       key=lambda r: -r["per_user_tokens_per_s"])
        ends = front[:1] + front[-1:] if len(front) > 1 else front
        for r in ends:
            click.echo(f"  {p}: {r['per_user_tokens_per_s']:,.0f} tokens/s per user (aggregate / live "
                       f"{r['aggregate_per_live_tokens_per_s']:,.0f}), "
                       f"{r['tokens_per_s_per_mw']:,.0f} tokens/s per MW ({where}), "
                       + ("" if r.get("usd_per_million_tokens") is None else
                          f"${r['usd_per_million_tokens']:,.3f} per million tokens, ") +
                       f"{r['tokens_per_s_per_device']:,.0f} per "
                       f"device ({plural(r['devices'], 'device')} at tp {r['tp']}{' ep' if r['ep'] else ''}, "
                       f"{r['live_per_replica']} live, {plural(r['replicas'], 'replica')} fit)")
        for line in band_lines(ends, lambda r: f"the {r['per_user_tokens_per_s']:,.0f} tokens/s per user point"):
            click.echo(f"    {line}")
    click.echo(price_line(fleets))
    for s in rep.sentences:
        click.echo(s)
    for n in rep.notes:
        click.echo(f"note: {n}")
    click.echo(f"wrote {' and '.join(written)}" if written else
               "nothing written (-o FILE writes the points, --plot FILE the plot)")
