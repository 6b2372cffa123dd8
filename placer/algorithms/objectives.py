"""Objective levels and their orders, the one definition the registry, the CLI and CP-SAT share."""

from __future__ import annotations

__all__ = ["LEVELS", "FIRST_LEVELS", "OBJECTIVE_ALIASES", "OBJECTIVES", "DEFAULT_OBJECTIVE", "parse_objective"]

# objective levels CP-SAT solves; an objective is an order of them ("devices,concurrency,latency"),
# or one of the names below; "moved" (weight bytes placed on a device that did not hold them
# before, :mod:`placer.algorithms.cpsat.moved`) needs the previous placement and comes first;
# "cost" (the devices level weighted by price, :mod:`placer.algorithms.cpsat.cost`) comes first too
LEVELS = ("moved", "cost", "devices", "concurrency", "latency", "bottleneck")
OBJECTIVE_ALIASES = {"devices": ("devices",), "lex": ("devices", "latency"),
                     "lex3": ("devices", "latency", "bottleneck"),
                     "cost": ("cost", "devices", "concurrency", "latency")}
# levels that come before the device count, one at most (each its own CP-SAT strategy)
FIRST_LEVELS = ("moved", "cost")
OBJECTIVES = tuple(OBJECTIVE_ALIASES)
# what `placer solve` asks for unless told otherwise; the library keeps "lex" (devices, latency)
# so that callers comparing hop latencies at the requested concurrency see them unchanged
DEFAULT_OBJECTIVE = "devices,concurrency,latency"


def parse_objective(text: str) -> tuple[str, ...]:
    """The levels of an objective, in order: a name of :data:`OBJECTIVE_ALIASES` or a comma list of
    :data:`LEVELS` that holds ``devices`` before ``latency`` before ``bottleneck`` (``concurrency``
    anywhere, ``moved`` or ``cost`` first when present). ValueError naming the objective otherwise."""
    if text in OBJECTIVE_ALIASES:
        return OBJECTIVE_ALIASES[text]
    order = tuple(x.strip() for x in str(text).split(",") if x.strip())
    bad = [x for x in order if x not in LEVELS]
    if bad or not order or len(set(order)) != len(order):
        raise ValueError(f"objective {text!r}: a comma list of levels {', '.join(LEVELS)} (each once), "
                         f"or one of {', '.join(OBJECTIVES)}")
    if any(x in FIRST_LEVELS for x in order[1:]):
        raise ValueError(f"objective {text!r}: {' or '.join(FIRST_LEVELS)} must be the first level, and only one")
    fixed = [x for x in order if x not in ("concurrency", *FIRST_LEVELS)]
    if "devices" not in fixed or fixed != [x for x in ("devices", "latency", "bottleneck") if x in fixed]:
        raise ValueError(f"objective {text!r}: devices must come first among devices, latency, bottleneck")
    return order
