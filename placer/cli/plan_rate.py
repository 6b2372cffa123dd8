"""``placer plan --rate R``: aggregated and disaggregated answers side by side (printing only)."""

from __future__ import annotations

from dataclasses import replace

import click

from placer.cli.common import echo_json, workload_text
from placer.planning import Requirements, SolverSettings
from placer.planning.studies.bands import band_lines
from placer.planning.studies.recommend import recommend


def _f(v, fmt="{:,.1f}"):
    return "-" if v is None else fmt.format(v)


def print_recommendation(m, fleet, wl, req: Requirements, time_limit: float, *, as_json: bool, quiet: bool) -> int:
    """``placer plan --rate``: the recommendation for ``req`` (its pools' rate, prompt and output
    tokens; its targets' TTFT and TPOT) printed or as JSON; the exit code."""
    solver = SolverSettings(method=None, time_limit=time_limit)
    rec = recommend(m, fleet, wl, req, solver, log=None if quiet else (lambda line: click.echo(line, err=True)))
    traffic = replace(req.traffic, arrival_rate=req.pools.rate).describe() if req.traffic is not None else None
    if as_json:
        echo_json({**rec.to_dict(), "traffic": traffic})
        return 0 if any(r["feasible"] and r["meets_ttft"] for r in rec.rows()) else 1
    pools, targets = req.pools, req.targets
    click.echo(f"{m.name} on {fleet.name} at {pools.rate:,.3g} requests/s: TTFT <= {targets.max_ttft_ms:g} ms, TPOT <= "
               f"{1000 / targets.speed_floor:.4g} ms, ISL {pools.prompt_tokens or wl.context_tokens}, "
               f"OSL {pools.decode_tokens}")
    click.echo(workload_text(wl, fleet=fleet))
    if traffic is not None:
        click.echo(traffic)
    click.echo(f"{'serving':<14} {'devices':>7} {'kW':>7} {'layout':<34} {'TTFT ms':>8} {'TPOT ms':>8} "
               f"{'meets':>5} {'proven':>6}")
    for r in rec.rows():
        kw = None if r["power_w"] is None else r["power_w"] / 1e3
        click.echo(f"{r['serving']:<14} {_f(r['devices'], '{}'):>7} {_f(kw):>7} {str(r['layout'] or '-'):<34} "
                   f"{_f(r['ttft_ms']):>8} {_f(r['tpot_ms'], '{:,.2f}'):>8} {'yes' if r['meets_ttft'] else 'no':>5} "
                   f"{'yes' if r['proven'] else 'no':>6}")
        if not r["feasible"]:
            click.echo(f"  {r['message']}")
    rows = [r for r in rec.rows() if r["feasible"]]
    for line in (band_lines(rows, lambda r: r["serving"], what="TPOT") +
                 band_lines(rows, lambda r: r["serving"], key="prefill_error_band", what="prefill TTFT")):
        click.echo(line)
    click.echo("aggregated: live requests by Little's law at the targets, TTFT from the closed-loop simulation "
               "with chunked prefill; disaggregated: TTFT = M/D/1 queueing + prefill + KV transfer")
    return 0
