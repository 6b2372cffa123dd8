from __future__ import annotations

import click

from placer.algorithms.deadline import Deadline
from placer.cli.common import (
    echo_json,
    input_file,
    output_file,
    quiet_option,
    renamed,
    threads_option,
    time_limit_option,
    write_mapping_if_asked,
)
from placer.cli.solve_cmd import print_progress
from placer.planning.replan import RELOAD_BANDWIDTH, RELOAD_SOURCE, replan
from placer.planning.requirements import SolverSettings
from placer.specs.errors import InvalidSpec
from placer.specs.units import format_bytes, format_duration_us, parse_bandwidth, plural


def _bandwidth(ctx, param, value):
    if value is None:
        return None
    try:
        rate = parse_bandwidth(value)
    except (InvalidSpec, ValueError) as exc:
        raise click.BadParameter(getattr(exc, "message", None) or str(exc)) from None
    if not rate > 0:
        raise click.BadParameter("a positive rate, e.g. 26.4 GB/s")
    return rate


@click.command("replan")
@click.argument("mapping", type=input_file)
@click.option("--failed", "failed", multiple=True, required=True, metavar="DEVICE",
              help="A failed device id (e.g. r3w1) or a whole rack (rack:3); repeatable.")
@click.option("--model", "model_ref", default=None,
              help="Model catalog name or spec file (default: the one the mapping names).")
@click.option("--hardware", "-H", "hardware_ref", default=None,
              help="Hardware catalog name or spec file (default: the one the mapping names).")
@click.option("--reload-bandwidth", default=None, callback=_bandwidth, metavar="RATE",
              help=f"Storage read rate the reload times are counted at (default {RELOAD_SOURCE}).")
@click.option("--fresh/--no-fresh", default=True, show_default=True,
              help="Also solve afresh on the surviving devices and print the bytes that plan would move.")
@time_limit_option("Time limit in seconds for each solve (the re-placement, the fresh solve).")
@click.option("--seed", type=int, default=0, show_default=True, help="CP-SAT random seed.")
@threads_option
@click.option("-o", "--output", type=output_file, default=None,
              help="Write the new stage mapping to this file (atomically; nothing is written without it).")
@click.option("--json", "as_json", is_flag=True, help="Print both plans, the bytes moved and the reload times as JSON.")
@quiet_option
def replan_command(mapping, failed, model_ref, hardware_ref, reload_bandwidth, fresh, time_limit, seed, threads,
                   workers_deprecated, output, as_json, quiet):
    """Place MAPPING's model again without the --failed devices, loading the fewest weight bytes anew.

    The requirements (model, hardware, workload, mode, pins, require, tensor parallelism, reserve)
    are read from MAPPING. CP-SAT minimises, in order: the weight bytes placed on a device that did
    not hold them before, the devices, the guaranteed concurrency and the hop latency, each proven
    or with its bound. The new mapping is checked by the independent validator on the surviving
    devices. Beside it, a fresh solve on the survivors and the bytes it would move, each with the
    time to reload them from storage.

    Exit 0 with a valid re-placement, 1 when none was found or it fails validation, 2 on bad input.
    """
    threads = renamed("--threads", threads, workers_deprecated, default=2)
    deadline = Deadline.since_command_start(time_limit * (2 if fresh else 1))
    kw = {} if reload_bandwidth is None else {"bandwidth": reload_bandwidth}
    solver = SolverSettings(method="cpsat", time_limit=time_limit, seed=seed, threads=threads,
                            progress=None if quiet else print_progress, deadline=deadline)
    out = replan(mapping, failed, model=model_ref, hardware=hardware_ref, solver=solver, fresh=fresh, **kw)
    ok = out.feasible and not out.violations
    where = write_mapping_if_asked(output, out.mapping) if ok else "mapping not written (no valid re-placement)"
    if as_json:
        echo_json(dict(out.to_dict(), written=where))
        return 0 if ok else 1
    _print(out, where)
    return 0 if ok else 1


def _print(out, where: str) -> None:
    before, after = out.before, out.instance
    click.echo(f"{before.model.name} on {before.fleet.name}, {before.mode}: {plural(len(out.failed), 'device')} failed "
               f"({_ids(out.failed)}); {after.count_words(after.n_devices)} left"
               + (" (a group of the tensor-parallel degree needs every device of it)" if after.tp > 1 else ""))
    r = out.solved.result
    if not r.feasible:
        click.echo(f"re-placement: {r.status}: {r.message or 'no placement found'}")
        click.echo(where)
        return
    click.echo(f"re-placement (fewest bytes moved first): {plural(r.devices_used, 'device')}, "
               f"{'proven' if r.proven_optimal else 'not proven'}")
    for level in r.levels:
        click.echo(f"  {level.name}: {_value(level.name, level.value)}, bound {_value(level.name, level.bound)}, "
                   f"{'proven' if level.proven else 'not proven'}{'' if level.note is None else f' ({level.note})'}")
    click.echo(f"  moves {_moved(out, out.moved)}")
    if out.fresh is not None:
        f = out.fresh.result
        if f.feasible:
            click.echo(f"fresh solve on the survivors: {plural(f.devices_used, 'device')}, "
                       f"{'proven' if f.proven_optimal else 'not proven'}, moves {_moved(out, out.fresh_moved)}")
        else:
            click.echo(f"fresh solve on the survivors: {f.status}: {f.message or 'no placement found'}")
    click.echo(f"reload at {format_bytes(out.bandwidth)}/s"
               + (f" ({RELOAD_SOURCE})" if out.bandwidth == RELOAD_BANDWIDTH else " (--reload-bandwidth)"))
    if out.violations:
        click.echo(f"the re-placement fails validation ({len(out.violations)} violation(s)):")
        for v in out.violations:
            click.echo(f"  {v.kind}: {v.message}")
    else:
        click.echo("validated: the independent validator finds no violation on the surviving devices")
    click.echo(where)


def _ids(ids) -> str:
    return ", ".join(ids) if len(ids) <= 6 else f"{', '.join(ids[:5])} and {len(ids) - 5} more"


def _moved(out, n_bytes) -> str:
    seconds = out.reload_seconds(n_bytes)
    return f"{format_bytes(n_bytes)} of weights ({n_bytes:,} B), {format_duration_us(seconds * 1e6)} to reload"


def _value(name: str, value) -> str:
    if value is None:
        return "none"
    if name in ("moved", "bottleneck"):
        return format_bytes(value)
    if name == "latency":
        return format_duration_us(value)
    return f"{value:g}" if isinstance(value, float) else str(value)
