"""``placer simulate`` of a two-pool mapping: the composition of :func:`placer.simulate.pooled.simulate_pooled`, printed."""

from __future__ import annotations

import click

from placer.cli.common import echo_json


def _ms(v) -> str:
    return "-" if v is None else f"{v / 1e3:,.2f} ms"


def print_pooled_simulation(doc: dict, *, model=None, output_tokens: int | None = None, seed: int = 0,
                            as_json: bool = False) -> int:
    from placer.simulate.pooled import simulate_pooled

    r = simulate_pooled(doc, model=model, output_tokens=output_tokens or 16, seed=seed)
    if as_json:
        echo_json(r)
        return 0
    reps = r["replicas"]
    click.echo(f"{doc['model']['name']}, disaggregated: {reps['prefill']} prefill + {reps['decode']} decode "
               f"replica(s) at {r['rate']:,.3g} requests/s")
    for pool in ("prefill", "decode"):
        click.echo(f"  {pool} replica's {r[pool]['traffic']['text']}")
    click.echo(f"  TTFT p50 {_ms(r['ttft_p50_us'])}, p99 {_ms(r['ttft_p99_us'])} (a prefill replica's run at "
               f"{r['rate'] / reps['prefill']:,.3g} requests/s + the KV transfer {_ms(r['transfer_us'])}); "
               f"target {r['max_ttft_ms']:g} ms")
    click.echo(f"  TPOT {_ms(r['tpot_us'])}, ITL p50 {_ms(r['itl_p50_us'])}, p99 {_ms(r['itl_p99_us'])} (a decode "
               f"replica's decode-only run at {doc['summary']['decode_load']} live); target {r['tpot_target_ms']:.4g} ms")
    power = "-" if r["power_w"] is None else f"{r['power_w'] / 1e3:,.1f} kW"
    click.echo(f"  aggregate {r['aggregate_tokens_per_s']:,.0f} output tokens/s over every decode replica, power "
               f"{power}; targets {'met' if r['meets_targets'] else 'missed'}")
    for pool, what in (("prefill", "TTFT"), ("decode", "TPOT and speeds")):
        if r[pool].get("speed_error"):
            click.echo(f"  {what}: {r[pool]['speed_error']} (the {pool} replica's run)")
    click.echo("  the two pools are simulated apart and composed (placer/simulate/pooled.py)")
    return 0 if r["meets_targets"] else 1
