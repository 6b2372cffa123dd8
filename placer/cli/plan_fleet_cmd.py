"""``placer plan-fleet FILE``: several models placed jointly on one fleet (:mod:`placer.planning.fleet_plan`)."""

from __future__ import annotations

import click

from placer.cli.common import (
    echo_json,
    hardware_option,
    input_file,
    load_fleet_chosen,
    output_file,
    threads_option,
    time_limit_option,
    write_mapping_if_asked,
)
from placer.specs.errors import InvalidSpec


@click.command("plan-fleet")
@click.argument("plan_file", type=input_file)
@hardware_option()
@click.option("--racks", type=click.IntRange(1, 100000), default=None, help="Resize the fleet.")
@click.option("--objective", type=click.Choice(("devices", "mw", "requests")), default=None,
              help="The joint level: fewest devices (default), least power (mw), or the most requests/s "
                   "within the file's budget (requests); replaces the file's.")
@time_limit_option("Time limit in seconds for each solve (each model alone, each replica placed, the joint level; "
                   "the file's time_limit when not given); the whole plan stops after four.")
@click.option("--seed", type=int, default=0, show_default=True, help="CP-SAT random seed.")
@threads_option
@click.option("-o", "--output", "--out", type=output_file, default=None,
              help="Write the fleet mapping (every model's pipelines) to this file.")
@click.option("--json", "as_json", is_flag=True, help="Print the joint plan as JSON.")
def plan_fleet_command(plan_file, hardware, racks, objective, time_limit, seed, threads, workers_deprecated,
                       output, as_json):
    """Place every model of PLAN_FILE (a YAML list of models, each with its workload, traffic,
    targets and replicas) on one fleet, jointly: fewest devices, least power, or the most
    requests/s within a budget, a device hosting layers of one model only.

    Each model is first placed alone (its proven minimum bounds any joint plan); a CP-SAT
    relaxation then decides which device types each model's replicas take, and each of its
    solutions is placed replica by replica on the devices left. The joint level is proven when
    a placement meets the relaxation's bound.

    Exit 0 with a joint plan, 1 when none was found, 2 on bad input.
    """
    from placer.cli.common import renamed
    from placer.planning.fleet_plan import plan_fleet
    from placer.planning.fleet_plan_file import read_fleet_plan
    from placer.planning.requirements import SolverSettings

    spec = read_fleet_plan(plan_file)
    source = click.get_current_context().get_parameter_source("time_limit")
    if spec.time_limit is not None and source == click.core.ParameterSource.DEFAULT:
        time_limit = spec.time_limit        # the file's, unless --time-limit is given
    if objective is not None:
        from dataclasses import replace

        if spec.budget is not None and objective != "requests" and objective != spec.budget_unit:
            raise InvalidSpec("--objective", "objective", f"the plan's budget is in {spec.budget_unit}")
        spec = replace(spec, objective=objective)
    ref = hardware or spec.hardware
    if ref is None:
        raise InvalidSpec(plan_file, "hardware", "name the fleet (hardware: in the file, or -H)")
    fleet = load_fleet_chosen(ref, racks=racks if racks is not None else (None if hardware else spec.racks))
    solver = SolverSettings(method="cpsat", time_limit=time_limit, seed=seed,
                            threads=renamed("--threads", threads, workers_deprecated, default=2))
    fp = plan_fleet(spec, fleet, solver)
    where = write_mapping_if_asked(output, fp.mapping) if fp.feasible else "mapping not written (no joint plan)"
    if as_json:
        echo_json(dict(fp.to_dict(), written=where))
        return 0 if fp.feasible else 1
    _print(fp, where)
    return 0 if fp.feasible else 1


def _level(fp) -> str:
    if not fp.feasible:
        return "proven: no joint plan exists" if fp.proven else (
            "no joint plan found" + ("" if fp.bound is None else f"; any needs at least {fp.bound:,.0f}"))
    unit = {"devices": "devices", "mw": "W", "requests": "requests/s"}[fp.objective]
    form = ",.3f" if fp.objective == "requests" else ",.0f"
    value = format(fp.value, form)
    bound = "none" if fp.bound is None else format(fp.bound, form)
    side = "upper bound" if fp.objective == "requests" else "bound"
    return f"{fp.objective}: {value} {unit}, {side} {bound} {unit}, {'proven' if fp.proven else 'not proven'}"


def _print(fp, where: str) -> None:
    n = len(fp.models)
    click.echo(f"{n} model(s) on {fp.fleet.name} ({len(fp.fleet.available)} devices), objective {fp.objective}")
    if not fp.feasible:
        click.echo(f"no joint plan: {fp.message}")
        if not fp.proven:
            click.echo(f"  {_level(fp)}")
        click.echo(where)
        return
    power = fp.power_w
    click.echo(f"devices {fp.devices} (each model alone: {fp.alone_sum} in all)"
               + ("" if power is None else f", power {power / 1e3:,.1f} kW ({fp.fleet.power_label()})"))
    click.echo(f"  {_level(fp)} ({fp.tried} relaxation choice(s) placed)")
    for m in fp.models:
        types = {}
        for r in m.replicas:
            for d in _devices(r):
                t = fp.fleet.by_id[d].type.name
                types[t] = types.get(t, 0) + 1
        kinds = ", ".join(f"{k} x {t}" for t, k in types.items())
        alone = m.fewest
        tps = sorted({r.instance.tp for r in m.replicas})
        rate = "" if m.rate is None else f", {m.rate:,.3f} requests/s each"
        click.echo(f"  {m.entry.name}: {len(m.replicas)} replica(s){rate}, {m.devices} devices ({kinds}), tp "
                   f"{','.join(map(str, tps))}; alone: {alone} per replica"
                   + ("" if not m.by_type else " (" + ", ".join(
                       f"{t}: {_alone(p)}" for t, p in m.by_type.items()) + ")"))
        for k, r in enumerate(m.replicas):
            levels = ", ".join(f"{lv.name} {lv.value:g}{'' if lv.proven else f' (bound {lv.bound:g})'}"
                               for lv in r.result.levels if lv.value is not None and lv.bound is not None)
            click.echo(f"    replica {k}: {r.result.devices_used} devices, {levels}")
    click.echo(where)


def _devices(p) -> list[str]:
    from placer.planning.fleet_plan import plan_devices

    return plan_devices(p)


def _alone(p) -> str:
    from placer.planning.fleet_plan import _least

    n = _least(p)
    return "none" if n is None else str(n)
