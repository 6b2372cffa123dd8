"""``placer solve --survive 1-device|1-rack``: the plan with the spares that make every such failure
survivable (:func:`placer.planning.spares.plan_spares`), printed after the plan itself."""

from __future__ import annotations

import click

from placer.planning.replan import RELOAD_BANDWIDTH, RELOAD_SOURCE
from placer.planning.requirements import SolverSettings
from placer.planning.spares import AVAILABILITY, AVAILABILITY_SOURCE, SURVIVE, plan_spares
from placer.specs.errors import InvalidSpec
from placer.specs.units import format_bytes, format_duration_us, plural

__all__ = ["survive_options", "check_survive", "plan_survivable", "print_spares"]


def survive_options(f):
    f = click.option("--availability", type=click.FloatRange(0, 1, min_open=True), default=None, metavar="A",
                     help=f"With --survive: the share of time each device is up (default {AVAILABILITY_SOURCE}).")(f)
    return click.option("--survive", type=click.Choice(SURVIVE), default=None,
                        help="Also the fewest devices (the plan's plus spares) such that after any one failure of "
                             "this kind a valid re-placement exists on the survivors; each failure is re-placed "
                             "(fewest bytes moved first) and validated, the worst named, and the pipeline's "
                             "availability printed with and without the spares.")(f)


def check_survive(survive, availability, *, floor: bool, disagg: bool, per_stage: bool) -> None:
    """:class:`InvalidSpec` naming the flag when --survive cannot apply, before any solve."""
    if survive is None:
        if availability is not None:
            raise InvalidSpec("--availability", "availability", "applies with --survive")
        return
    if floor or disagg or per_stage:
        raise InvalidSpec("--survive", "survive", "spares are planned for one pipeline: not with a speed floor, "
                                                  "--disagg or --per-stage-tp")


def plan_survivable(planned, survive: str, availability, settings: SolverSettings):
    """The spares of ``planned`` for ``survive`` (each re-placement with the settings' time limit,
    seed and threads, quietly)."""
    return plan_spares(planned, survive, solver=settings.replace(progress=None, deadline=None),
                       availability=AVAILABILITY if availability is None else availability)


def print_spares(spares, availability) -> None:
    """The spares as ``placer solve --survive`` prints them after the plan (``availability``: the
    value given, None for the default)."""
    survive = spares.survive
    inst = spares.instance
    if inst is None or not spares.failures:
        click.echo(f"survive {survive}: no plan to add spares to")
        return
    ids = [inst.members(d)[0] for d in spares.spares]
    groups = "" if inst.tp == 1 else f" in {plural(len(ids), 'group')} of {inst.tp}, led by"
    bound = "none" if spares.lower_bound is None else str(spares.lower_bound * inst.tp)
    click.echo(f"survive {survive}: {plural(spares.devices, 'device')} ({len(spares.used) * inst.tp} of the plan + "
               f"{plural(len(spares.spares) * inst.tp, 'spare')}{groups}: {_short(ids)}), lower bound {bound}, "
               f"{'proven' if spares.proven else 'not proven'}")
    failures = spares.failures
    solved = sum(f.how == "cpsat" for f in failures)
    lost = [f for f in failures if not f.survived]
    each = "" if inst.tp == 1 or survive != "1-device" else " (a device of each group: any takes its group out)"
    click.echo(f"  {plural(len(failures), 'failure')} checked{each}: {solved} re-placed by CP-SAT (fewest bytes moved "
               f"first; one per class of devices holding the same weights), {len(failures) - solved} by moving the "
               f"lost nodes onto a spare; " + ("every re-placement validated" if not lost else
                                               f"{len(lost)} without a valid re-placement: {_short([_name(f) for f in lost])}"))
    worst = spares.worst
    if worst is not None:
        seconds = worst.moved / RELOAD_BANDWIDTH
        click.echo(f"  worst failure: {_name(worst)}, moves {format_bytes(worst.moved)} of weights "
                   f"({'the least possible, proven' if worst.proven else 'not proven least'}), "
                   f"{format_duration_us(seconds * 1e6)} to reload at {RELOAD_SOURCE}")
    per = spares.availability
    click.echo(f"  availability: {per:g} per device ({'--availability' if availability is not None else AVAILABILITY_SOURCE}); "
               f"the pipeline {spares.pipeline_availability(False):.5f} without spares (every device up), "
               f"{spares.pipeline_availability(True):.5f} with them (the devices down within one {survive} failure)")
    before, after = spares.price_per_hour(False), spares.price_per_hour(True)
    if before is not None:
        click.echo(f"  price: ${before:,.2f} per hour without spares, ${after:,.2f} with them "
                   f"(+{after / before - 1:.1%}; the hardware's price: {inst.devices[0].type.price_source})")


def _name(f) -> str:
    return f.failed[0] if len(f.failed) == 1 else f"{f.failed[0]}..{f.failed[-1]} ({len(f.failed)} devices)"


def _short(items) -> str:
    items = list(items)
    return ", ".join(items) if len(items) <= 6 else f"{', '.join(items[:5])} and {len(items) - 5} more"
