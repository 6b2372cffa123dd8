from __future__ import annotations

import click

from placer.cli.common import (
    context_type,
    echo_json,
    granularity_option,
    hardware_option,
    image_file,
    load_inputs,
    method_option,
    power_choice,
    stopped,
    text_only_option,
    time_limit_option,
    warn,
    workload_notes,
    workload_text,
)
from placer.cli.session_options import session_options, simulate_sessions_command
from placer.cli.traffic_options import reserved_context, traffic_options
from placer.mapping import read_mapping, serving_of, specs_from_mapping
from placer.planning import Placement, Requirements, SolverSettings
from placer.planning.studies.compare import granularity_for
from placer.planning.studies.modes import compare_modes
from placer.problem.instance import MODES
from placer.simulate.arguments import Traffic, resolve_lengths
from placer.simulate.des import DEFAULT_MAX_NUM_BATCHED_TOKENS, RUNTIME_MAX_BATCH, SCHEDULES, simulate_mapping
from placer.specs.errors import InvalidSpec
from placer.specs.units import format_duration_us, plural
from placer.specs.workload import workload_for


def _f(v, fmt="{:,.1f}"):
    """``v`` by a format string, or by a formatting function (durations: format_duration_us)."""
    if v is None:
        return "-"
    return fmt(v) if callable(fmt) else fmt.format(v)


@click.command("simulate")
@click.argument("target", required=False)
@hardware_option()
@click.option("--compare", "compare_model", default=None, metavar="MODEL",
              help="Place MODEL in every mode on --hardware and simulate the placements side by side.")
@click.option("--all-modes", is_flag=True, help="TARGET is a model: the same as --compare TARGET.")
@click.option("--requests", type=click.IntRange(1, 10**6), default=None,
              help="Requests to serve (default: as many as the KV reserve holds at once).")
@click.option("--context", type=context_type, default=None,
              help="The older form: total tokens per request, e.g. 256k, its last --osl tokens generated.")
@traffic_options(context_dist=True, decode_only=True,
                 osl_default="the plan's, else the model spec's default traffic, else 1k")
@session_options
@click.option("--schedule", type=click.Choice(SCHEDULES), default=None,
              help="continuous: each device batches the requests waiting for it, up to --max-batch (the "
                   "default); micro-batch: fixed micro-batches of --micro-batch (the default once it is given).")
@click.option("--max-batch", type=click.IntRange(1, 10**6), default=None,
              help="Continuous batching: requests per device step (default: the runtime's; the KV reserve caps it).")
@click.option("--runtime", type=click.Choice(list(RUNTIME_MAX_BATCH)), default=None,
              help="Runtime whose default batch limit continuous batching uses (default vllm: 256).")
@click.option("--micro-batch", type=click.IntRange(1, 10**6), default=None,
              help="Fixed micro-batch size (selects the micro-batch schedule).")
@click.option("--arrival-rate", type=click.FloatRange(0, min_open=True), default=None,
              help="The older name of --rate.")
@click.option("--duration", type=click.FloatRange(0, min_open=True), default=None,
              help="Simulated seconds (default: until every request finishes).")
@click.option("--max-live", type=click.IntRange(1, 10**9), default=None, help="Cap on live requests.")
@click.option("--max-num-batched-tokens", type=click.IntRange(1, 10**7), default=None,
              help=f"Tokens one step carries, decodes first, then prompt chunks (default "
                   f"{DEFAULT_MAX_NUM_BATCHED_TOKENS:,}, vLLM's).")
@click.option("--prefill", is_flag=True, hidden=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--gantt", type=image_file, default=None, metavar="FILE",
              help="Draw stage occupancy to exactly FILE (PNG, or SVG / PDF by suffix).")
@method_option("cpsat", help="Placement method for --compare.")
@granularity_option
@time_limit_option("CP-SAT time limit per mode for --compare.")
@click.option("--modes", default=",".join(MODES), show_default=True, help="Modes for --compare.")
@click.option("--model", "model_ref", default=None, help="Model spec (default: the one the mapping names).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--spec-gain", is_flag=True,
              help="A mapping planned for speculative decoding: simulate it with and without its drafts at live "
                   "loads 1, 2, 4, ... up to its KV ceiling (--requests caps them) and say where speculation "
                   "stops paying.")
@text_only_option("With --compare: drop a multimodal model's vision/audio tower (a mapping records its own).")
def simulate_command(target, hardware, compare_model, all_modes, requests, context, traffic, sessions, tier,
                     schedule, max_batch, runtime, micro_batch, arrival_rate, duration, max_live,
                     max_num_batched_tokens, prefill, seed, gantt, method, granularity, time_limit, modes, model_ref,
                     as_json, spec_gain=False, text_only=False):
    """Simulate serving the stage mapping TARGET at full size (tokens/s per user and aggregate,
    inter-token latency, time to first token, stage utilisation, live requests, power, tokens/s per
    MW, J/token at the --power boundary), or, with --compare MODEL / --all-modes, every mode's
    placement of a model side by side. Every figure is for the traffic line printed beside it.

    \b
    Default traffic: the plan's (a mapping records it), else the model spec's default_traffic
    (kimi-k3: agent turns over its 256k context, 86% cached), else an 8k-token prompt then 1k
    output tokens (the 8k/1k of the public serving benchmarks), the prompt cut to fit the
    context; closed loop at the live requests the placement holds."""
    decode_only = traffic.decode_only
    cached_prompt = traffic.traffic.cached_prompt_tokens
    if cached_prompt is None and traffic.traffic.cached_share is not None:
        cached_prompt = traffic.traffic.cached_share
    if arrival_rate is not None and traffic.rate is not None and arrival_rate != traffic.rate:
        raise InvalidSpec("--arrival-rate", "arrival_rate", "is the older name of --rate: give one of them")
    sim = traffic.sim()
    if arrival_rate is not None:
        sim["arrival_rate"] = arrival_rate
    max_live = max_live or traffic.concurrency
    if traffic.traffic.replay is not None and max_live is not None and "arrival_rate" not in sim:
        sim["closed_loop"] = True         # a trace under a live cap: a closed loop drawing its lengths
    output_tokens = traffic.output_tokens()
    if prefill:
        warn("--prefill: prefill: prefill is modelled by default now; the flag does nothing (--decode-only "
             "leaves it out)")
    if prefill and decode_only:
        raise InvalidSpec("--decode-only", "decode_only", "contradicts --prefill")
    if decode_only and max_num_batched_tokens is not None:
        raise InvalidSpec("--max-num-batched-tokens", "max_num_batched_tokens", "prices prefill chunks; "
                                                                                "--decode-only has none")
    if cached_prompt is not None and decode_only:
        raise InvalidSpec("--cached-prompt", "cached_prompt", "applies to prefill; --decode-only has none")
    if text_only and not (compare_model or all_modes):
        raise InvalidSpec("--text-only", "text_only", "applies to --compare MODEL; a mapping records whether "
                                                      "its tower was left out")
    if compare_model or all_modes:
        return _compare_command(compare_model or target, hardware, modes, reserved_context(context, traffic),
                                output_tokens,
                                SolverSettings(method=method, time_limit=time_limit, seed=seed),
                                granularity, as_json,
                                dict(micro_batch=micro_batch, max_live=max_live, requests=requests,
                                     max_num_batched_tokens=max_num_batched_tokens,
                                     schedule=schedule, max_batch=max_batch, runtime=runtime,
                                     **{k: v for k, v in sim.items() if k != "output_tokens"}),
                                text_only=text_only)
    if not target:
        raise InvalidSpec("<mapping>", "-", "name a stage-mapping file (or use --compare MODEL)")
    mapping = read_mapping(target)
    if mapping.get("kind") == "disaggregated":
        from placer.cli.simulate_pooled import print_pooled_simulation

        return print_pooled_simulation(mapping, model=model_ref, output_tokens=output_tokens, seed=seed,
                                       as_json=as_json)
    if sessions is not None:
        from placer.simulate.arguments import Serving
        return simulate_sessions_command(mapping, sessions, tier, model_ref=model_ref, hardware=hardware,
                                         duration=duration, seed=seed, as_json=as_json, serving=Serving(
                                             schedule=schedule, max_batch=max_batch, runtime=runtime,
                                             micro_batch=micro_batch, max_num_batched_tokens=max_num_batched_tokens))
    if spec_gain:
        return _print_spec_gain(mapping, model_ref, hardware, requests, output_tokens or 32, as_json, sim)
    serving = serving_of(mapping)
    if serving is not None:
        # a plan for a speed floor runs at the load it was planned for (one replica), unless told otherwise
        requests = requests or serving["live_per_replica"]
        max_live = max_live or serving["live_per_replica"]
        if "output_tokens" not in sim and serving.get("output_tokens"):
            sim["output_tokens"] = serving["output_tokens"]
    power, pue = power_choice()
    res = simulate_mapping(mapping, model=model_ref, hardware=hardware, power=power, pue=pue, requests=requests,
                           context=context, schedule=schedule, max_batch=max_batch, runtime=runtime,
                           micro_batch=micro_batch, duration_s=duration, max_live=max_live, seed=seed,
                           max_num_batched_tokens=max_num_batched_tokens, trace=gantt is not None, **sim)
    if gantt:
        from placer.plotting import plot_gantt, save
        gantt = save(plot_gantt(res).figure, gantt)
    if as_json:
        echo_json({**res.to_dict(), "workload": mapping["workload"]})
        return 0
    _print_run(mapping, res, serving, model_ref, hardware, gantt)
    return 0


def _compare_command(model_ref, hardware, modes, context, output_tokens, solver, granularity, as_json, sim,
                     text_only=False) -> int:
    """``placer simulate --compare MODEL``: every mode's placement of MODEL simulated side by side
    (``sim``: the simulation's options, the micro-batch among them)."""
    if not model_ref:
        raise InvalidSpec("--compare", "model", "name the model to compare")
    if not hardware:
        raise InvalidSpec("--hardware", "hardware", "--compare needs --hardware")
    wanted = tuple(m.strip() for m in modes.split(",") if m.strip())
    bad = [m for m in wanted if m not in MODES]
    if bad or not wanted:
        raise InvalidSpec("--modes", "modes", f"unknown mode {bad[0] if bad else '(none)'!r} "
                                              f"(choose from {', '.join(MODES)})")
    m, fleet, _ = load_inputs(model_ref, hardware, text_only=text_only)
    wl = workload_for(m, context=context, micro_batch=sim["micro_batch"])
    for note in workload_notes(m, wl):
        warn(note)
    req = Requirements(Placement(granularity=granularity_for("split", granularity)))
    if output_tokens is None:
        _t, shapes = resolve_lengths(Traffic(), wl.context_tokens, m.default_traffic)
        output_tokens = round(shapes.mean_output)
    doc = compare_modes(m, fleet, wl, req, solver, modes=wanted, output_tokens=output_tokens, **sim)
    done = stopped(doc, "modes", err=True)      # Ctrl-C: the modes so far, then exit 130
    if as_json:
        echo_json(doc)
        return done
    _print_compare(doc)
    return done


def _print_run(mapping, res, serving, model_ref, hardware, gantt) -> None:
    """One simulated run of a mapping as ``placer simulate`` prints it."""
    power, pue = power_choice()
    s = mapping["summary"]
    click.echo(f"{mapping['model']['name']} on {mapping['hardware']['name']} ({mapping['mode']}): "
               f"{plural(len(res.stages), 'stage')}, {plural(res.segments, 'device visit')} per token, "
               f"{plural(s['hops'], 'hop')}")
    click.echo(f"{res.requests} requests, context {res.context}, {res.output_tokens} output tokens each, "
               f"live cap {_f(res.concurrency_cap, '{}')}")
    if res.traffic is not None:
        click.echo(res.traffic.describe())
    click.echo(f"schedule: {_schedule(res)}")
    click.echo(f"load: {_load(res)}")
    click.echo(f"placed for {workload_text(mapping['workload'])}")
    if serving is not None:
        click.echo(f"speed floor {serving['min_user_tokens_per_s']:,.1f} tokens/s per user: one of "
                   f"{plural(serving['replicas'], 'replica')} at {serving['live_per_replica']} live requests "
                   f"({serving['planned_live_requests']} planned in all)")
    click.echo(f"  per-user speed        {_f(res.per_user_tokens_per_s)} tokens/s "
               f"(alone: {1e6 / res.unloaded_token_latency_us:,.1f})")
    click.echo(f"  aggregate speed       {_f(res.aggregate_tokens_per_s)} tokens/s "
               f"(pipeline bound {res.pipeline_bound_tokens_per_s:,.1f})")
    if res.speed_error:
        click.echo(f"  speeds                {res.speed_error}")
    click.echo(f"  inter-token latency   p50 {format_duration_us(res.itl_p50_us)}, "
               f"p99 {format_duration_us(res.itl_p99_us)}")
    if not res.decode_only:
        click.echo(f"  time to first token   p50 {format_duration_us(res.ttft_p50_us)}, "
                   f"p99 {format_duration_us(res.ttft_p99_us)}; {res.prefill_step_fraction:.0%} of decode "
                   f"steps share a prefill chunk")
    click.echo(f"  live requests         peak {res.live_requests}, mean {res.live_requests_mean:,.1f}")
    util = res.stage_utilization
    click.echo(f"  stage utilisation     mean {sum(util) / len(util):.1%}, min {min(util):.1%}, "
               f"max {max(util):.1%}; bubbles {res.bubble_fraction:.1%}")
    where = power_label(res.power_boundary, res.pue)
    click.echo(f"  power ({where})".ljust(24) + f"{_f(res.power_w and res.power_w / 1e3, '{:,.1f}')} kW; "
               f"{_f(res.tokens_per_s_per_mw, '{:,.0f}')} tokens/s per MW ({where}); "
               f"{_f(res.joules_per_token, '{:,.2f}')} J/token ({where})")
    _m, fleet, _wl = specs_from_mapping(mapping, model=model_ref, hardware=hardware)
    for note in fleet.with_power(power or fleet.power_boundary, pue).power_notes():
        click.echo(f"  note: {note}")
    if mapping.get("parallel", {}).get("ep", 1) > 1:
        from placer.mapping import instance_from_mapping
        from placer.simulate.expert_balance import report_lines, worth_reporting

        inst = instance_from_mapping(mapping, model=model_ref, hardware=hardware)[3]
        if worth_reporting(inst):      # wide or redundant EP at the run's mean batch
            for line in report_lines(inst, max(1, round(res.live_requests_mean))):
                click.echo(f"  {line}")
    if gantt:
        click.echo(f"stage occupancy drawn to {gantt}")


def _print_spec_gain(mapping, model_ref, hardware, requests, output_tokens, as_json, sim=None) -> int:
    """``--spec-gain``: the gain of the mapping's speculation at each live load (decode only)."""
    from placer.mapping import instance_from_mapping
    from placer.simulate.arguments import Traffic, resolve
    from placer.simulate.spec_gain import speculation_gain

    spec = mapping.get("speculative") or {}
    if spec.get("accept") is None:
        raise InvalidSpec("<mapping>", "speculative", "--spec-gain needs a mapping planned for speculative decoding "
                                                      "with a known acceptance length (placer solve --spec-tokens K "
                                                      "[--spec-accept A])")
    _m, _f, _wl, inst = instance_from_mapping(mapping, model=model_ref, hardware=hardware)
    route = [inst.device_index[d] for d in mapping["route"]]
    ceiling = mapping["summary"].get("concurrency_ceiling") or 1
    cap = min(ceiling, requests) if requests else min(ceiling, 1024)
    lengths = {k: v for k, v in (sim or {}).items() if k in ("prompt_tokens", "context_dist")}
    gain = speculation_gain(inst, route, spec_k=int(spec["tokens"]), spec_accept=float(spec["accept"]), cap=cap,
                            output_tokens=output_tokens, **lengths)
    traffic = resolve(Traffic(decode_only=True, output_tokens=output_tokens, **lengths), inst)[0]
    if as_json:
        echo_json({**gain.to_dict(), "traffic": traffic.to_dict("each live load")})
        return 0
    click.echo(f"{mapping['model']['name']} on {mapping['hardware']['name']}: {spec['tokens']} draft token(s) per "
               f"step at acceptance length {spec['accept']:g}, decode only, {output_tokens} tokens per request")
    click.echo(traffic.describe("each live load"))
    click.echo(f"{'live':>6} {'tok/s with':>11} {'tok/s without':>14} {'per user with':>14} "
               f"{'per user without':>17} {'gain':>6}")
    for r in gain.rows:
        click.echo(f"{r['live']:>6} {_f(r['with_tokens_per_s'], '{:,.0f}'):>11} "
                   f"{_f(r['without_tokens_per_s'], '{:,.0f}'):>14} {_f(r['per_user_with']):>14} "
                   f"{_f(r['per_user_without']):>17} {_f(r['gain'], '{:.2f}x'):>6}")
    top = gain.rows[-1]["live"]
    click.echo(f"speculation stops paying at {gain.stops_paying_at} live requests" if gain.stops_paying_at else
               f"speculation pays at every load up to {top} live requests")
    return 0


def power_label(boundary: str | None, pue: float | None) -> str:
    """``system``, ``chip`` or ``facility, PUE 1.56``: the boundary a power figure is counted at."""
    if boundary == "facility" and pue is not None:
        return f"facility, PUE {pue:g}"
    return boundary or "system"


def _load(res) -> str:
    if res.decode_only:
        return "decode only: every prompt already in the KV cache, all requests at once"
    if res.closed_loop:
        return (f"closed loop of {res.users:,} users, a finished request replaced at once; prompts prefilled "
                f"in chunks of up to {res.max_num_batched_tokens:,} tokens per step beside the decodes; "
                f"measured over {format_duration_us(res.window_us)} of steady state from "
                f"{format_duration_us(res.window_start_us)}")
    return (f"Poisson arrivals; prompts prefilled in chunks of up to {res.max_num_batched_tokens:,} tokens per "
            f"step beside the decodes")


def _schedule(res) -> str:
    if res.schedule == "micro-batch":
        return f"micro-batch {res.micro_batch} (fixed micro-batches walk the route)"
    limit = "the KV reserve only" if res.max_batch is None else f"{res.max_batch:,}"
    return (f"continuous batching (runtime {res.runtime}: each device takes the requests waiting for it, "
            f"up to {limit} per step; mean {res.batch_mean:,.1f} per step)")


def _print_compare(doc: dict) -> None:
    click.echo(f"{doc['model']} on {doc['hardware']}: every mode's placement simulated, schedule "
               f"{doc['schedule']}, {doc['output_tokens']} output tokens per request")
    click.echo(workload_text(doc["workload"]))
    click.echo(doc["traffic"]["text"])
    where = power_label(doc.get("power_boundary"), doc.get("pue"))
    click.echo(f"power counted at the {where} boundary")
    cols = [("mode", "{}"), ("method", "{}"), ("status", "{}"), ("devices_used", "{}"), ("hops", "{}"),
            ("hop_latency_us", format_duration_us), ("concurrency_ceiling", "{}"), ("single_user_tokens_per_s", "{:,.1f}"),
            ("per_user_tokens_per_s", "{:,.1f}"), ("aggregate_tokens_per_s", "{:,.0f}"), ("ttft_p50_us", format_duration_us),
            ("power_w", "{:,.0f}"), ("tokens_per_s_per_mw", "{:,.0f}"), ("joules_per_token", "{:,.2f}")]
    labels = {"devices_used": "devices", "hop_latency_us": "hop latency", "concurrency_ceiling": "live cap",
              "single_user_tokens_per_s": "tok/s alone", "per_user_tokens_per_s": "tok/s/user at cap",
              "aggregate_tokens_per_s": "tok/s total", "ttft_p50_us": "TTFT p50",
              "power_w": f"power W ({doc.get('power_boundary') or 'system'})",
              "tokens_per_s_per_mw": f"tok/s/MW ({doc.get('power_boundary') or 'system'})",
              "joules_per_token": f"J/token ({doc.get('power_boundary') or 'system'})"}
    width = max([22, *(len(r["mode"]) for r in doc["rows"])])
    for key, fmt in cols:
        cells = [_f(r.get(key), fmt) for r in doc["rows"]]
        click.echo(f"{labels.get(key, key):<{width}}" + "".join(f"{c:>{width}}" for c in cells))
    bands = {r.get("speed_error") for r in doc["rows"] if r.get("speed_error")}
    if len(bands) == 1:
        click.echo(f"speeds: {bands.pop()}")
    for r in doc["rows"]:
        if len(bands) > 1 and r.get("speed_error"):
            click.echo(f"{r['mode']} speeds: {r['speed_error']}")
        if r.get("message"):
            click.echo(f"{r['mode']}: {r['message']}")
