"""The session flags (``--sessions PRESET|FILE``, ``--session-rate``, ``--session-count``,
``--session-total``, ``--tier``) and ``placer simulate MAPPING --sessions``'s printout.

The flags sit beside the traffic flags (:mod:`placer.cli.traffic_options`): they replace the
requests a run serves by sessions of turns (:mod:`placer.simulate.session_traffic`), and ``--tier``
names the KV tier below the chip idle sessions park in (:mod:`placer.specs.tiers`).
"""

from __future__ import annotations

import functools

import click

from placer.simulate.session_traffic import PRESETS, Sessions, SessionShape, parse_sessions
from placer.specs.errors import InvalidSpec
from placer.specs.tiers import TIER_NAMES

__all__ = ["session_options", "print_sessions", "simulate_sessions_command", "held_options", "count_held", "print_held",
           "DEFAULT_SESSION_COUNT"]

DEFAULT_SESSION_COUNT = 16


def _build(kw: dict) -> tuple[Sessions | None, str | None]:
    given, rate, count = kw.pop("sessions"), kw.pop("session_rate"), kw.pop("session_count")
    total, tier = kw.pop("session_total"), kw.pop("tier")
    if given is None:
        for flag, v in (("--session-rate", rate), ("--session-count", count), ("--session-total", total),
                        ("--tier", tier)):
            if v is not None:
                raise InvalidSpec(flag, flag[2:].replace("-", "_"), "applies to session traffic: give --sessions too")
        return None, None
    try:
        what = parse_sessions(given)
    except InvalidSpec as exc:
        raise InvalidSpec("--sessions", "sessions", exc.message) from None
    if rate is None and count is None and isinstance(what, SessionShape):
        count = DEFAULT_SESSION_COUNT
    shape = what if isinstance(what, SessionShape) else None
    return Sessions(shape=shape, trace=None if shape else what, rate=rate, count=count, total=total), tier


def session_options(f):
    """The session flags on a command; it receives ``sessions`` (:class:`Sessions` or None) and ``tier``."""

    @functools.wraps(f)
    def wrapper(*args, **kw):
        kw["sessions"], kw["tier"] = _build(kw)
        return f(*args, **kw)

    opts = [
        click.option("--sessions", default=None, metavar="PRESET|FILE",
                     help="Session traffic: a preset (" + ", ".join(PRESETS) + ") or a session trace (the GitHub "
                          "Copilot coding-agent JSONL, gzip or plain): sessions of turns whose context grows, "
                          "idle between turns."),
        click.option("--session-rate", type=click.FloatRange(0, min_open=True), default=None, metavar="R",
                     help="Sessions arrive as a Poisson stream of R per second."),
        click.option("--session-count", type=click.IntRange(1, 10**6), default=None, metavar="N",
                     help=f"A closed loop of N live sessions, each ended one replaced (default "
                          f"{DEFAULT_SESSION_COUNT} for a preset; a trace's own arrivals otherwise)."),
        click.option("--session-total", type=click.IntRange(1, 10**6), default=None, metavar="N",
                     help="Sessions started in all (default: the count, 100 at a rate, a trace's own)."),
        click.option("--tier", type=click.Choice(TIER_NAMES), default=None,
                     help="Park idle sessions' KV in this tier of the hardware spec and reload it at their next "
                          "turn (default: the tier the mapping's session plan chose, else none: an evicted "
                          "session's prefix is prefilled again)."),
    ]
    for opt in reversed(opts):
        wrapper = opt(wrapper)
    return wrapper


def _us(v) -> str:
    from placer.specs.units import format_duration_us

    return "-" if v is None else format_duration_us(v)


def print_sessions(mapping: dict, res) -> None:
    """The text printout of a session run (:class:`placer.simulate.sessions.SessionResult`)."""
    sim = res.sim
    click.echo(f"{mapping['model']['name']} on {mapping['hardware']['name']} ({mapping['mode']}): sessions simulated")
    click.echo(f"  {res.sessions.describe()}")
    click.echo(f"  tier: {res.tier_text}" if res.tier else
               "  tier: none (an idle session evicted from the chip prefills its whole context again)")
    rows = [
        ("sessions held", f"peak {res.sessions_held_peak:,}, mean {res.sessions_held_mean:,.1f} "
                          f"({res.sessions_started:,} started, {res.sessions_ended:,} ended)"),
        ("turns", f"{res.turns:,}: prefix on the chip {res.turns_from_chip:,}, reloaded from the tier "
                  f"{res.turns_reloaded:,}, prefilled again {res.turns_recomputed:,}"),
        ("TTFT per turn", f"p50 {_us(sim.ttft_p50_us)}, p99 {_us(sim.ttft_p99_us)}"),
        ("per user", f"{sim.per_user_tokens_per_s or 0:,.1f} tokens/s while generating (ITL p50 "
                     f"{_us(sim.itl_p50_us)})"),
        ("aggregate", f"{sim.aggregate_tokens_per_s:,.1f} tokens/s"),
        ("tier traffic", f"{res.bytes_parked / 1e9:,.2f} GB parked, {res.bytes_reloaded / 1e9:,.2f} GB reloaded, "
                         f"mean reload {_us(res.reload_us_mean)}; at most {res.tier_peak_bytes / 1e9:,.2f} GB "
                         f"on one device's tier"),
        (f"power ({sim.power_boundary or 'system'})",
         "-" if res.power_w is None else f"{res.power_w / 1e3:,.1f} kW with the tier; "
                                         f"{res.tokens_per_s_per_mw or 0:,.0f} tokens/s per MW"),
    ]
    for name, text in rows:
        click.echo(f"  {name}".ljust(24) + text)
    click.echo("  assumptions: " + "; ".join(res.assumptions))


def simulate_sessions_command(mapping: dict, sessions: Sessions, tier: str | None, *, model_ref, hardware, duration,
                              serving, seed: int, as_json: bool) -> int:
    """``placer simulate MAPPING --sessions ...``: run the sessions and print them (or one JSON object)."""
    from dataclasses import replace

    from placer.cli.common import echo_json, power_choice
    from placer.simulate.arguments import RunSettings
    from placer.simulate.sessions import simulate_sessions_mapping

    power, pue = power_choice()
    if tier is None:            # the tier the plan chose for its sessions (its "sessions" record), if any
        tier = (mapping.get("sessions") or {}).get("tier")
    if duration is not None:
        sessions = replace(sessions, duration_s=duration)
    res = simulate_sessions_mapping(mapping, sessions, tier, model=model_ref, hardware=hardware, power=power,
                                    pue=pue, serving=serving, run=RunSettings(seed=seed))
    if as_json:
        echo_json({**res.to_dict(), "workload": mapping["workload"]})
        return 0
    print_sessions(mapping, res)
    return 0


def held_options(f):
    """``placer solve``'s --sessions PRESET, --ttft-target MS and --tier: the command receives
    ``held`` ((shape, target ms, tier) or None) and prints the sessions its plan holds."""

    @functools.wraps(f)
    def wrapper(*args, **kw):
        given, target, tier = kw.pop("sessions"), kw.pop("ttft_target"), kw.pop("tier")
        kw["held"] = None
        if given is None:
            for flag, v in (("--ttft-target", target), ("--tier", tier)):
                if v is not None:
                    raise InvalidSpec(flag, flag[2:].replace("-", "_"), "applies to session traffic: give --sessions too")
        else:
            if given not in PRESETS:
                raise InvalidSpec("--sessions", "sessions", f"{given!r}: a preset ({', '.join(PRESETS)})")
            if target is None:
                raise InvalidSpec("--ttft-target", "ttft_target", "sessions held are counted under a per-turn TTFT "
                                                                  "target: give --ttft-target MS")
            kw["held"] = (PRESETS[given], target, tier)
        return f(*args, **kw)

    opts = [
        click.option("--sessions", default=None, metavar="PRESET",
                     help="Also count the sessions of PRESET (" + ", ".join(PRESETS) + ") the plan holds under "
                          "--ttft-target, on the chip and with --tier."),
        click.option("--ttft-target", type=click.FloatRange(0, min_open=True), default=None, metavar="MS",
                     help="Per-turn TTFT target for --sessions (ms)."),
        click.option("--tier", type=click.Choice(TIER_NAMES), default=None,
                     help="With --sessions: idle sessions park in this tier of the hardware spec."),
    ]
    for opt in reversed(opts):
        wrapper = opt(wrapper)
    return wrapper


def count_held(planned, held):
    """The sessions a placed plan holds (:func:`placer.planning.sessions_held.sessions_held`), recorded in
    its mapping document as ``sessions`` (:mod:`placer.mapping.tiers`): the preset, the target, the KV
    reserve and tier it chose, the sessions held and whether that is proven."""
    from placer.planning.sessions_held import sessions_held

    shape, target, tier = held
    counted = sessions_held(planned.instance, planned.result.assignment, shape, target, tier)
    planned.mapping["sessions"] = counted.record(shape.name, target)
    return counted


def print_held(held, counted) -> None:
    """The printout of :func:`count_held`'s count."""
    shape, target, _tier = held
    click.echo(f"sessions: {shape.describe()}")
    for line in counted.lines(target):
        click.echo(line)
