from __future__ import annotations

import click

from placer.cli.common import (
    Progress,
    context_type,
    echo_json,
    granularity_option,
    hardware_option,
    load_inputs,
    method_option,
    quiet_option,
    text_only_option,
    time_limit_option,
    workload_doc,
    workload_text,
)
from placer.cli.traffic_options import reserved_context, traffic_options
from placer.planning import Placement, Pools, Requirements, Targets, build_instance
from placer.planning.budget import plan_replicas
from placer.specs.errors import InvalidSpec
from placer.specs.units import plural


@click.command("plan")
@click.argument("model")
@hardware_option(required=True)
@click.option("--total-concurrency", "-n", type=click.IntRange(1, 10**9), default=None,
              help="Live requests the replicas hold together (or --rate).")
@click.option("--max-ttft-ms", type=float, default=None, metavar="MS", help="With --rate: TTFT target.")
@click.option("--max-itl-ms", type=float, default=None, metavar="MS", help="With --rate: TPOT target.")
@click.option("--min-user-tps", type=float, default=None, metavar="X", help="With --rate: TPOT target as 1000 / X ms.")
@traffic_options(rate=True)
@click.option("--prefill-hardware", default=None, metavar="HW",
              help="With --rate: the disaggregated plan's prefill hardware, or a device type of the fleet.")
@click.option("--context", type=context_type, default=None, help="Context tokens per request, e.g. 256k.")
@click.option("--mode", type=click.Choice(["contiguous", "free", "split"]), default="contiguous", show_default=True)
@granularity_option
@method_option()
@time_limit_option("CP-SAT time limit per placement.")
@click.option("--weight-bits", type=click.IntRange(1, 64), default=None)
@click.option("--kv-bits", type=click.IntRange(1, 64), default=None)
@click.option("--racks", type=click.IntRange(1, 100000), default=None, help="Resize the fleet.")
@text_only_option()
@click.option("--objective", type=click.Choice(["devices", "mw", "tokens-per-mw", "cost"]), default="devices",
              show_default=True, help="With --rate: what the aggregated plan minimises among those meeting the "
                                      "targets (cost: US dollars per hour from the hardware's price: blocks).")
@click.option("--json", "as_json", is_flag=True)
@quiet_option
def plan_command(model, hardware, total_concurrency, max_ttft_ms, max_itl_ms, min_user_tps, traffic,
                 prefill_hardware, context, mode, granularity, method, time_limit, weight_bits, kv_bits, racks,
                 text_only, objective, as_json, quiet):
    """Fewest devices that hold N live requests with k identical pipeline replicas, for every useful k;
    with --rate, the fewest devices meeting TTFT and TPOT targets at that request rate, aggregated
    and disaggregated side by side (for the traffic line printed).

    \b
    Default traffic: the model spec's default_traffic, else an 8k-token prompt then 1k output
    tokens (the public benchmarks' 8k/1k), the prompt cut to fit --context. --isl/--osl without
    --context reserve the longest request."""
    m, fleet, wl = load_inputs(model, hardware, context=reserved_context(context, traffic), weight_bits=weight_bits,
                               kv_bits=kv_bits, racks=racks, text_only=text_only)
    resolved, isl, osl = traffic.resolved(m, wl.context_tokens)
    rate = traffic.rate
    if rate is not None:
        from placer.cli.plan_rate import print_recommendation
        from placer.cli.solve_disagg import _prefill_fleet

        req = Requirements(targets=Targets(max_ttft_ms=max_ttft_ms, max_itl_ms=max_itl_ms, min_user_tps=min_user_tps,
                                           speed_objective=objective),
                           pools=Pools(prefill_fleet=_prefill_fleet(fleet, prefill_hardware), rate=rate,
                                       prompt_tokens=isl, decode_tokens=osl), traffic=resolved)
        return print_recommendation(m, fleet, wl, req, time_limit, as_json=as_json, quiet=quiet)
    if objective != "devices":
        raise InvalidSpec("--objective", "objective", "applies with --rate")
    if total_concurrency is None:
        raise InvalidSpec("--total-concurrency", "total_concurrency", "give --total-concurrency N or --rate R")
    inst = build_instance(m, fleet, wl, Requirements(Placement(mode=mode, granularity=granularity),
                                                     traffic=resolved if traffic.given else None))
    with Progress(None, "replica counts", quiet=quiet, desc="plan ") as bar:
        plan = plan_replicas(inst, total_concurrency, method=method, time_limit=time_limit,
                             progress=lambda o: bar.step(failed=o.total_devices is None,
                                                         desc=f"plan: {o.replicas} replica(s) "))
    if as_json:
        echo_json({**plan.to_dict(), "workload": workload_doc(wl.replace(concurrency=total_concurrency))})
        return
    click.echo(f"{m.name} on {fleet.name} ({plural(plan.fleet_devices, 'device')}), {mode} ({inst.model.granularity}), {plan.method}: "
               f"{total_concurrency} live requests")
    click.echo(workload_text(wl, concurrency=f"{total_concurrency} in total, ceil({total_concurrency} / k) per replica"))
    click.echo(f"{'':1} {'replicas':>8} {'each holds':>10} {'devices each':>12} {'total':>6} {'fits fleet':>10} "
               f"{'proven':>6}")
    for o in plan.options:
        mark = "*" if plan.best is not None and o.replicas == plan.best.replicas else \
            "=" if o in plan.tied else " "
        each = "-" if o.devices_per_replica is None else o.devices_per_replica
        total = "-" if o.total_devices is None else o.total_devices
        click.echo(f"{mark:1} {o.replicas:>8} {o.replica_concurrency:>10} {each!s:>12} {total!s:>6} "
                   f"{'yes' if o.fits_fleet else 'no':>10} {'yes' if o.proven else 'no':>6}"
                   + ("" if o.total_devices is not None else f"  ({o.status}: {o.message})"))
    starred = plan.best is not None and any(o.replicas == plan.best.replicas for o in plan.options)
    if starred:      # the legend only under a table that has a starred row
        click.echo("* fewest devices" + ("; = the same total (a tie, broken in favour of fewer replicas)"
                                         if plan.tied else ""))
    elif plan.tied:
        click.echo("= the same total (a tie, broken in favour of fewer replicas)")
    click.echo(f"stopped: {plan.stop_reason}")
    click.echo(plan.summary())
