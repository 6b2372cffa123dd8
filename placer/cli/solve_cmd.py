from __future__ import annotations

import click

from placer.algorithms.deadline import Deadline
from placer.cli.common import (
    backend_options,
    drafts_with_mtp,
    echo_json,
    echo_json_mapping,
    granularity_option,
    group_label,
    hardware_option,
    load_inputs,
    method_option,
    output_file,
    parallel_options,
    parse_degrees,
    quiet_option,
    redundant_experts_option,
    renamed,
    reserve_of,
    runtime_option,
    spec_decoding,
    speculation_text,
    speculative_options,
    threads_option,
    time_limit_option,
    workload_doc,
    workload_options,
    workload_text,
    write_mapping_if_asked,
)
from placer.cli.session_options import held_options
from placer.cli.solve_disagg import disagg_options, disagg_pools, print_disagg_plan
from placer.cli.solve_spares import check_survive, plan_survivable, print_spares, survive_options
from placer.cli.traffic_options import reserved_context, traffic_options
from placer.planning import Placement, Requirements, SolverSettings, Targets, plan
from placer.planning.studies.compare import node_ranges
from placer.problem.instance import MODES, REQUIREMENTS
from placer.simulate.arguments import study_traffic
from placer.specs.units import format_bytes, format_duration_us, plural

# each objective level's unit (Result.levels and cpsat's progress phases)
LEVEL_UNITS = {"cost": "$/h", "devices": "devices", "concurrency": "live requests", "latency": "us", "bottleneck": "B"}


def _fmt(value, unit: str = "") -> str:
    return "-" if value is None else f"{value:g}{unit}" if isinstance(value, float) else f"{value}{unit}"


# the objective level each CP-SAT phase works on, and how its figures read
PHASE_LEVELS = {"devices": ("devices", "devices"), "path": ("hop latency", "us"), "latency": ("hop latency", "us"),
                "bottleneck": ("bottleneck load", "solver units")}


def progress_line(info) -> str:
    """One solver report as a line: the level searched, its best value and a lower bound valid for
    that level, each in the level's unit, and the seconds since the solve began."""
    if not isinstance(info, dict):
        return f"cpsat: {info}"
    phase = info.get("phase")
    level, unit = PHASE_LEVELS.get(phase, (phase or "search", ""))

    def value(v):
        if v is None:
            return "-"
        if unit == "us":
            return format_duration_us(v)
        if unit == "devices":
            return f"{v:g} devices"
        return f"{v:g} ({unit})" if unit else f"{v:g}"

    parts = [f"best {value(info.get('best', info.get('objective')))}",
             f"lower bound {value(info.get('bound'))}"]
    elapsed = info.get("elapsed", info.get("seconds"))
    if elapsed is not None:
        parts.append(f"{float(elapsed):.1f} s")
    if info.get("message"):
        parts.append(str(info["message"]))
    return f"cpsat, {level} level: " + ", ".join(parts)


def degree_line(tp: int, solved) -> str:
    """One line per degree tried: devices, stages, concurrency ceiling, hop latency, proof."""
    r = solved.result
    label = f"tp {tp}" + (" attention-dp" if solved.instance is not None and solved.instance.attention_dp else "")
    if not r.feasible:
        return f"  {label}: {r.status}: {r.message or 'no placement found'}"
    stages = solved.stages
    proof = "proven" if r.proven_optimal else ("devices proven" if r.devices_proven else "not proven")
    return (f"  {label}: {plural(r.devices_used, 'device')} ({plural(stages, 'stage')} of {tp}), concurrency ceiling "
            f"{_fmt(r.concurrency_ceiling)}, hop latency {format_duration_us(r.hop_latency_us)}, {proof}, "
            f"{format_duration_us(r.seconds * 1e6)}")


def _layout_word(inst) -> str:
    return f"{inst.tp} attention-dp" if inst.attention_dp else str(inst.tp)


def print_progress(info) -> None:
    """Each solver report as one line on stderr (see :func:`progress_line`)."""
    click.echo(progress_line(info), err=True)


@click.command("solve")
@click.argument("model")
@hardware_option(required=True)
@click.option("--mode", type=click.Choice(MODES), default=None,
              help="contiguous (default; free for typepack and ffd), free, or split.")
@granularity_option
@method_option("cpsat", help="Placement method.")
@click.option("--pin", "pins", multiple=True, metavar="SPEC",
              help="N=DEVICE or NAME=DEVICE (node on a device), A-B (layers on one device); repeatable.")
@workload_options
@parallel_options
@redundant_experts_option
@time_limit_option("Time limit in seconds for the whole solve (bounds, search, the explanation; every "
                   "tensor-parallel degree).")
@click.option("--seed", type=int, default=0, show_default=True, help="CP-SAT random seed.")
@threads_option
@click.option("-o", "--output", type=output_file, default=None,
              help="Write the stage mapping to this file (nothing is written without it).")
@click.option("--json", "as_json", is_flag=True, help="Print the stage mapping as JSON.")
@click.option("--stages", "show_stages", is_flag=True, help="Also print the stage table after the summary.")
@click.option("--no-write", is_flag=True, hidden=True, help="Deprecated: solve writes only with -o.")
@click.option("--min-user-tps", type=float, default=None, metavar="X",
              help="Speed floor: only placements whose simulated per-user speed at --concurrency is at least "
                   "X tokens/s (replicas added as needed).")
@click.option("--max-itl-ms", type=float, default=None, metavar="MS",
              help="The same floor as a longest inter-token latency: 1000 / MS tokens/s.")
@click.option("--max-ttft-ms", type=float, default=None, metavar="MS",
              help="Beside a speed floor: the p99 time to first token each replica keeps to at its load "
                   "(closed loop with chunked prefill).")
@click.option("--objective", default=None, metavar="LEVELS",
              help="CP-SAT's levels in order, e.g. devices,concurrency,latency (the default; also devices, "
                   "latency, bottleneck), or cost (the devices' price per hour from the hardware's price: blocks "
                   "first, then devices, concurrency, latency). With a speed floor: devices (default), mw, "
                   "tokens-per-mw or cost.")
@click.option("--per-stage-tp", "per_stage_tp", is_flag=True,
              help="Let the tensor-parallel degree differ per stage, chosen from --tp (default: the divisors of "
                   "every node size the model allows), for fleets of mixed GPU types and runtimes that allow it "
                   "(vLLM and SGLang do not). Contiguous mode, no pins.")
@click.option("--require", "require", multiple=True, type=click.Choice(list(REQUIREMENTS)),
              help="A constraint on every placement, proven like the levels: attention-per-stage (each stage "
                   "holds a full-attention layer), decoder-per-stage (each holds a decoder layer), "
                   "embedding-first-head-last, uniform-degree, mtp-with-head (the drafter on the LM head's "
                   "stage); repeatable (--runtime adds a runtime's own).")
@runtime_option
@speculative_options
@click.option("--attention-dp/--no-attention-dp", "attention_dp", default=None,
              help="Attention data parallelism: each stage's group splits its requests over its ranks (each "
                   "its own KV cache, attention weights whole), experts spread whole (SGLang "
                   "--attn-dp-size, vLLM --data-parallel-size with --enable-expert-parallel). Default: "
                   "tried for MLA MoE models when no tensor-parallel layout places; --no-attention-dp never.")
@click.option("--jobs", "-j", "jobs", type=click.IntRange(1, 4096), default=1, show_default=True,
              help="Device layouts (tensor-parallel degrees, experts spread or split) solved at once, one "
                   "process each (--backend ray: one Ray task each); the same plan and proofs as one at a time.")
@backend_options
@click.option("--sim", "sim", type=click.Choice(("fast", "exact")), default="fast", show_default=True,
              help="With a speed floor: search the loads each shape holds with the fast simulator path "
                   "(placer.simulate.steady; each answer and every reported figure confirmed by the event run) "
                   "or with event runs throughout (exact).")
@disagg_options
@traffic_options(rate=True)
@survive_options
@quiet_option
@held_options
def solve_command(model, hardware, mode, granularity, method, pins, time_limit, seed, threads, workers_deprecated,
                  output, as_json, show_stages, no_write, min_user_tps, max_itl_ms, objective, require, quiet,
                  tp, ep, reserve, spec_tokens=None, spec_method=None, draft_model=None, spec_accept=None,
                  per_stage_tp=False, runtime=None, max_ttft_ms=None, attention_dp=None, disagg=False,
                  prefill_hardware=None, traffic=None, survive=None, availability=None, sim="fast", jobs=1, held=None,
                  backend="process", address=None,
                  **kw):
    """Place MODEL on the --hardware fleet: fewest devices, then least hop latency.

    On GPU fleets every stage is a group of --tp devices of one node; each allowed degree is
    solved and the plan with the fewest devices (then the highest concurrency ceiling, then the
    least hop latency) is kept.

    Prints the summary (devices, bound, proof, concurrency, latency, workload), the stage table
    with --stages, and writes the stage mapping only to -o FILE. An impossible request prints the
    reason and the largest concurrency that fits, writes nothing and exits 1.

    \b
    Speeds (floors, TTFT, disaggregated pools) are for the traffic line printed beside them.
    Default traffic: the model spec's default_traffic (kimi-k3: agent turns over its 256k context,
    86% cached), else an 8k-token prompt then 1k output tokens (the public benchmarks' 8k/1k), the
    prompt cut to fit --context. --isl/--osl without --context reserve the longest request.
    """
    # every phase below shares it (spec reading, every degree's solve, the explanation, the output),
    # counted from the command's start: the process's own start when run as `placer solve`
    deadline = Deadline.since_command_start(time_limit)
    threads = renamed("--threads", threads, workers_deprecated, default=2)
    if drafts_with_mtp(spec_tokens, draft_model, spec_method):
        kw["mtp"] = True        # drafting with the model's own MTP layers places them
    if held is not None and kw.get("context") is None:
        kw["context"] = held[0].final_context()      # sessions: reserve their longest context
    if held is not None and kw.get("concurrency") is None:
        kw["concurrency"] = 1       # sessions: the sessions-held count chooses the KV reserve, not a concurrency
    kw["context"] = reserved_context(kw.get("context"), traffic)
    m, fleet, wl = load_inputs(model, hardware, **kw)
    floor = min_user_tps is not None or max_itl_ms is not None
    check_survive(survive, availability, floor=floor, disagg=disagg, per_stage=per_stage_tp)
    _t, isl, osl = traffic.resolved(m, wl.context_tokens)
    req = Requirements(
        Placement(mode=mode, granularity=granularity, degrees=parse_degrees(tp), per_stage_degrees=per_stage_tp,
                  expert_parallel=(True if ep else None) if floor else bool(ep), attention_dp=attention_dp,
                  reserve=reserve_of(reserve), pins=tuple(pins), constraints=tuple(require), runtime=runtime),
        Targets(min_user_tps=min_user_tps, max_itl_ms=max_itl_ms, max_ttft_ms=max_ttft_ms,
                speed_objective=(objective or "devices") if floor else "devices",
                objective=None if floor else objective, cached_prompt_tokens=traffic.cached_tokens or 0, sim=sim,
                output_tokens=osl),
        spec_decoding(spec_tokens, spec_method, draft_model, spec_accept),
        disagg_pools(fleet, disagg, prefill_hardware, traffic.rate, isl, osl))
    solver = SolverSettings(method=method, time_limit=time_limit, seed=seed, threads=threads,
                            progress=None if quiet else print_progress, deadline=deadline, jobs=jobs,
                            backend=backend, address=address)
    planned = plan(m, fleet, wl, req, solver, traffic=traffic.closed if traffic.given else None,
                   log=None if quiet else (lambda line: click.echo(line, err=True)))
    if planned.pools is not None:
        return print_disagg_plan(planned, output, as_json)
    if planned.speed is not None:
        return _print_speed_plan(planned, output, as_json)
    if planned.per_stage:
        from placer.cli.solve_stage_degrees import print_per_stage_plan

        return print_per_stage_plan(planned, output, as_json)
    if survive is not None:
        return _with_spares(planned, survive, availability, solver, output, as_json, show_stages, deadline)
    counted = None
    if held is not None and planned.mapping is not None:
        from placer.cli.session_options import count_held

        counted = count_held(planned, held)     # recorded in the mapping (its "sessions") before it is written
    code = _print_plan(planned, output, as_json, show_stages, deadline)
    if counted is not None and not as_json:
        from placer.cli.session_options import print_held

        print_held(held, counted)
    return code


def _with_spares(planned, survive, availability, solver, output, as_json, show_stages, deadline) -> int:
    """The plan, then the spares that survive every --survive failure; exit 1 when some failure has
    no valid re-placement."""
    if not planned.feasible:
        return _print_plan(planned, output, as_json, show_stages, deadline)
    spares = plan_survivable(planned, survive, availability, solver)
    code = 0 if spares.survives else 1
    if as_json:
        return _print_plan(planned, output, as_json, show_stages, deadline, extra={"spares": spares.to_dict()}) or code
    done = _print_plan(planned, output, as_json, show_stages, deadline)
    print_spares(spares, availability)
    return done or code


def _print_plan(planned, output, as_json, show_stages, deadline, extra: dict | None = None) -> int:
    """The degree search's plan as ``placer solve`` prints it; the exit code."""
    m, fleet, wl, req = planned.model, planned.fleet, planned.workload, planned.requirements
    method = planned.solver.method
    for label, why in planned.refused.items():
        click.echo(f"{label} excluded: {why}", err=True)
    inst, r, doc = planned.instance, planned.result, planned.mapping
    # Ctrl-C: the best placement so far is printed and written as usual, then exit 130
    done = 130 if planned.interrupted else 0
    if done:
        click.echo("interrupted: " + ("best placement so far" if doc is not None else "no placement found yet"),
                   err=as_json)
    if doc is None:
        if as_json:
            echo_json({"status": str(r.status), "message": r.message, "max_concurrency": r.max_concurrency,
                       "lower_bound_devices": r.lower_bound_devices, "workload": workload_doc(wl)})
        else:
            click.echo(f"{m.name} on {fleet.name}, {inst.mode} ({inst.model.granularity}), method {method}: "
                       f"no placement")
            click.echo(workload_text(wl, fleet=fleet, reserve=req.placement.reserve))
            if r.status == "infeasible":
                # why, in bytes, and what would fit (placer.planning.studies.explain; bounded by the solve's time limit)
                click.echo(planned.explain(time_limit=20.0, deadline=deadline))
            else:
                click.echo(f"{r.status}: {r.message or 'no placement found'}")
                if r.max_concurrency is not None:
                    click.echo(f"largest feasible concurrency: {r.max_concurrency} "
                               f"(asked for {wl.concurrency})")
        return done or 1
    where = write_mapping_if_asked(output, doc)
    if as_json:
        return echo_json_mapping(dict(doc, **extra) if extra else doc, where, done)
    sm = doc["summary"]
    levels = r.levels
    click.echo(f"{m.name} on {fleet.name}, {inst.mode} ({inst.model.granularity}), method {method}: "
               f"{inst.n_nodes} nodes on {sm['devices_used']} devices")
    click.echo(workload_text(wl, fleet=fleet, reserve=req.placement.reserve))
    if doc.get("speculative") or doc["model"].get("mtp"):
        click.echo(speculation_text(doc))
    proven = "proven" if sm["proven_optimal"] else "not proven"
    # with per-level figures below, a single device gap would read as "0% from optimal"
    gap = "" if sm.get("gap") is None or levels else f", gap {sm['gap']:.1%}"
    click.echo(f"devices {sm['devices_used']} (lower bound {_fmt(sm['lower_bound_devices'])}), "
               f"concurrency {wl.concurrency} (ceiling {_fmt(sm['concurrency_ceiling'])}), "
               f"hop latency {format_duration_us(sm['hop_latency_us'])} over {sm['hops']} hops")
    click.echo(f"status {sm['status']} ({proven}{gap}), {format_duration_us(sm['solve_seconds'] * 1e6)}")
    for level in levels:
        capped = "" if level.cap is None else f", searched up to the workload limit of {level.cap:,}"
        click.echo(f"  {level.name}: {_level_value(level.name, level.value)}, "
                   f"bound {_level_value(level.name, level.bound, 'none')}, "
                   f"{'proven' if level.proven else 'not proven'}{capped}"
                   f"{'' if level.note is None else f' ({level.note})'}")
    if len(planned.tried) > 1 or inst.tp > 1:
        over = "proven over every degree" if planned.devices_proven else "not proven over every degree"
        dp = ", attention data parallel" if inst.attention_dp else ""
        click.echo(f"tensor parallel {inst.tp}{', expert parallel' if inst.ep else ''}{dp} "
                   f"(of {', '.join(_layout_word(s.instance) for s in planned.tried)}; device count {over}):")
        for s in planned.tried:
            click.echo(degree_line(s.instance.tp, s))
    from placer.simulate.expert_balance import report_lines, worth_reporting

    if worth_reporting(inst):          # wide or redundant EP: how experts spread, the all-to-all, the balance
        for line in report_lines(inst, sm["concurrency_ceiling"]):
            click.echo(line)
    if show_stages:
        _print_stages(inst, doc)
    else:
        click.echo(f"{len(doc['stages'])} stages (--stages prints the table)")
    click.echo(where)
    return done


def _level_value(name: str, value, missing: str = "-") -> str:
    """A level's value or bound in its unit: devices as a count, latency as a duration, bytes as bytes."""
    if value is None:
        return missing
    unit = LEVEL_UNITS.get(name, "")
    if unit == "us":
        return format_duration_us(value)
    if unit == "B":
        return format_bytes(value)
    if unit == "$/h":
        return f"${value:,.2f} per hour"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _print_stages(inst, doc) -> None:
    click.echo(f"{'stage':>5} {'devices':<10} {'rack':>4}  {'nodes':<28} {'weights':>10} {'KV':>10} "
               f"{'state':>10} {'reserve':>10} {'free':>10} {'max conc':>8} {'next hop':>9}")
    names = {x.name: i for i, x in enumerate(inst.nodes)}
    for s in doc["stages"]:
        b = s["bytes"]
        nodes = node_ranges(inst, [names[n] for n in s["layers"]])
        hop = s["next_hop_latency_us"]
        click.echo(f"{s['index']:>5} {group_label(s.get('group', {}).get('devices', [s['device']])):<10} {s['rack']:>4}  {nodes:<28} "
                   f"{format_bytes(b['weights']):>10} "
                   f"{format_bytes(b['kv_reserve']):>10} {format_bytes(b['state']):>10} "
                   f"{format_bytes(b['reserve']):>10} "
                   f"{format_bytes(b['free']):>10} {_fmt(s['max_concurrency']):>8} "
                   f"{format_duration_us(hop):>9}")
    if inst.tp > 1:
        click.echo(f"bytes per device: each of a stage's {inst.tp} devices holds these")


def _print_speed_plan(planned, output, as_json) -> int:
    """A speed-floor plan (:func:`placer.planning.speed.speed_search`) as ``placer solve`` prints it."""
    sp = planned.speed
    m, fleet, wl = planned.model, planned.fleet, planned.workload
    floor = sp.floor_tokens_per_s
    for what, why in sp.refused.items():
        click.echo(f"{what} excluded: {why}", err=True)
    doc = planned.mapping
    where = write_mapping_if_asked(output, doc, what=" (one replica)")
    targets = planned.requirements.targets
    load = None if sp.chosen is None else sp.chosen.row()["load_per_replica"]
    sim = planned.simulation
    traffic = sim.traffic if sim is not None and sim.traffic is not None else \
        study_traffic(wl.context_tokens, targets.output_tokens,
                      dict(requests=load, max_live=load, cached_prompt_tokens=targets.cached_prompt_tokens), m)
    traffic_doc = traffic.to_dict("the live loads searched")
    if as_json:
        return echo_json_mapping(dict(doc or {}, speed_target=dict(sp.to_dict(), traffic=traffic_doc)), where,
                                 0 if sp.feasible else 1)
    click.echo(f"{m.name} on {fleet.name}, speed floor {floor:,.1f} tokens/s per user "
               f"({1000 / floor:,.2f} ms between tokens), {wl.concurrency} planned live requests, "
               f"objective {sp.objective}")
    click.echo(workload_text(wl, fleet=fleet, reserve=planned.requirements.placement.reserve))
    if sp.chosen is None:
        click.echo(sp.message)
        return 1
    r = sp.chosen.row()
    click.echo(sp.message)
    click.echo(f"{traffic_doc['text']} (per replica)")
    layouts = [s.layout for s in sorted({(s.tp, s.ep): s for s in sp.shapes}.values(), key=lambda s: (s.tp, s.ep))]
    click.echo(f"  devices {r['devices']} ({r['replicas']} x {r['devices_per_replica']}, {sp.chosen.shape.layout} "
               f"of {', '.join(layouts)}), "
               f"{'-' if r['power_w'] is None else format(r['power_w'] / 1e3, ',.1f')} kW ({fleet.power_boundary}); per user "
               f"{r['per_user_tokens_per_s']:,.1f} tokens/s at {r['load_per_replica']} live per replica; "
               f"aggregate {r['aggregate_tokens_per_s']:,.0f} tokens/s; "
               f"{'-' if r['tokens_per_s_per_mw'] is None else format(r['tokens_per_s_per_mw'], ',.0f')} "
               f"tokens/s per MW ({fleet.power_boundary}); "
               f"holds {r['held']} live requests at the floor")
    if getattr(planned.simulation, "speed_error", None):
        click.echo(f"  speeds {planned.simulation.speed_error}")
    click.echo(f"  every figure from a discrete-event run of the placement (continuous batching); "
               f"{len(sp.candidates)} candidate(s) met the floor")
    click.echo(where)
    return 0
