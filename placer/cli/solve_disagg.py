"""``placer solve --disagg``: the flags of a disaggregated plan and how the plan prints."""

from __future__ import annotations

import click

from placer.cli.common import echo_json, echo_json_mapping, workload_text, write_mapping_if_asked
from placer.planning import Pools
from placer.planning.studies.compare_pools import pools_traffic
from placer.specs.errors import InvalidSpec


def disagg_options(f):
    """--disagg, --prefill-hardware (--max-ttft-ms is the speed floor's, which a disaggregated plan
    reads as its TTFT target: queueing + prefill + KV transfer; --rate, --isl and --osl are the
    traffic flags, :mod:`placer.cli.traffic_options`)."""
    opts = [
        click.option("--disagg", is_flag=True,
                     help="Plan a prefill pool and a decode pool (x prefill + y decode replicas) meeting "
                          "--max-ttft-ms and --max-itl-ms (or --min-user-tps) at --rate (or --concurrency live "
                          "decode requests), fewest devices first (--objective mw: least power)."),
        click.option("--prefill-hardware", default=None, metavar="HW",
                     help="With --disagg: the prefill pool's hardware (a spec or catalog name), or a device type "
                          "of --hardware's mixed fleet (the rest decodes). Default: the same fleet."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def _prefill_fleet(fleet, ref):
    if ref is None or ref in {d.type.name for d in fleet.devices}:
        return ref
    from placer.cli.common import load_fleet_chosen

    return load_fleet_chosen(ref)       # at the power boundary the command line chose, as the decode fleet


def disagg_pools(fleet, disagg, prefill_hardware, rate, isl, osl) -> Pools | None:
    """The :class:`~placer.planning.Pools` the flags ask for (None without --disagg, which
    --prefill-hardware and --rate are then refused without); ``isl`` / ``osl``: the traffic's mean
    prompt and output tokens."""
    given = {"--prefill-hardware": prefill_hardware, "--rate": rate}
    if not disagg:
        extra = [k for k, v in given.items() if v is not None]
        if extra:
            raise InvalidSpec(extra[0], extra[0].lstrip("-").replace("-", "_"), "applies to --disagg plans")
        return None
    return Pools(prefill_fleet=_prefill_fleet(fleet, prefill_hardware), rate=rate, prompt_tokens=isl,
                 decode_tokens=osl)


def print_disagg_plan(planned, output, as_json) -> int:
    """A disaggregated plan as ``placer solve --disagg`` prints it; the exit code."""
    dp = planned.pools
    doc = planned.mapping
    where = write_mapping_if_asked(output, doc, what=" (one replica of each pool)")
    if as_json:
        if doc is None:
            echo_json({"feasible": False, "message": dp.message, "disagg": dp.to_dict()})
            return 1
        return echo_json_mapping(doc, where, 0)
    m, fleet, wl = planned.model, planned.fleet, planned.workload
    asked = f"{dp.rate:,.3g} requests/s" if dp.rate is not None else f"{dp.concurrency} live decode requests"
    click.echo(f"{m.name}, disaggregated: prefill on {dp.prefill_fleet.name}, decode on {dp.decode_fleet.name}; "
               f"{asked}, ISL {dp.prompt_tokens}, OSL {dp.decode_tokens}, TTFT <= {dp.max_ttft_ms:g} ms, "
               f"TPOT <= {dp.tpot_ms:.4g} ms")
    click.echo(workload_text(wl, fleet=fleet, reserve=planned.requirements.placement.reserve))
    click.echo(pools_traffic(dp, planned.requirements).describe("the live decode requests"))
    click.echo(f"KV transfer: {dp.transfer_bytes:,} B per request over {dp.link.source} "
               f"({dp.link.bandwidth / 1e9:,.1f} GB/s, {dp.link.latency_us:g} us): "
               f"{dp.link.time_us(dp.transfer_bytes) / 1e3:,.3f} ms")
    click.echo(dp.message)
    c = dp.chosen
    if c is None:
        return 1
    for name, solved, shape in (("prefill", c.prefill.solved, c.prefill), ("decode", dp.decode_solved, c.decode)):
        r = solved.result
        proof = "proven" if r.proven_optimal else ("devices proven" if r.devices_proven else "not proven")
        extra = (f"{shape.in_flight} prompt(s) in flight, one every {shape.interval_us / 1e3:,.1f} ms"
                 if name == "prefill" else f"holds {shape.held} live at TPOT {shape.tpot_us / 1e3:,.2f} ms "
                                           f"(decode-only simulation)")
        click.echo(f"  {name}: {shape.layout}, {r.devices_used} devices per replica, status {r.status} ({proof}); "
                   f"{extra}")
    sim = dp.prefill_sim
    if sim is not None and sim.ttft_p50_us is not None:
        click.echo(f"  simulated prefill replica at {c.rate / c.x:,.3g} requests/s: TTFT p50 "
                   f"{sim.ttft_p50_us / 1e3:,.1f} ms, p99 {sim.ttft_p99_us / 1e3:,.1f} ms (before the transfer)")
    for what, run in (("TTFT", sim), ("TPOT", c.decode_sim or c.decode.sim)):
        if getattr(run, "speed_error", None):
            click.echo(f"  {what}: {run.speed_error}")
    click.echo(f"  {len(dp.candidates)} candidate pair(s) met the targets; devices {c.devices}"
               + ("" if c.power_w is None else f", {c.power_w / 1e3:,.1f} kW"))
    price, usd = dp.price_per_hour, dp.usd_per_million_tokens
    if price is not None:
        from placer.planning.disagg_price import price_sources

        click.echo(f"  ${price:,.2f} per hour for both pools" + ("" if usd is None else
                   f", ${usd:,.3f} per million output tokens at {c.rate:,.3g} requests/s x {dp.decode_tokens} "
                   f"tokens") + f" (prices: {'; '.join(price_sources(dp))})")
    click.echo(where)
    return 0
