"""Objective levels and their orders, the one definition the registry, the CLI and CP-SAT share."""

from __future__ import annotations

__all__ = ["LEVELS", "OBJECTIVE_ALIASES", "OBJECTIVES", "DEFAULT_OBJECTIVE", "parse_objective"]

# objective levels CP-SAT solves; an objective is an order of them ("devices,concurrency,latency"),
# or one of the names below
LEVELS = ("devices", "concurrency", "latency", "bottleneck")
OBJECTIVE_ALIASES = {"devices": ("devices",), "lex": ("devices", "latency"),
                     "lex3": ("devices", "latency", "bottleneck")}
OBJECTIVES = tuple(OBJECTIVE_ALIASES)
# what `placer solve` asks for unless told otherwise; the library keeps "lex" (devices, latency)
# so that callers comparing hop latencies at the requested concurrency see them unchanged
DEFAULT_OBJECTIVE = "devices,concurrency,latency"


def parse_objective(text: str) -> tuple[str, ...]:
    """The levels of an objective, in order: a name of :data:`OBJECTIVE_ALIASES` or a comma list of
    :data:`LEVELS` that holds ``devices`` before ``latency`` before ``bottleneck`` (``concurrency``
    anywhere). ValueError naming the objective otherwise."""
    if text in OBJECTIVE_ALIASES:
        return OBJECTIVE_ALIASES[text]
    order = tuple(x.strip() for x in str(text).split(",") if x.strip())
    bad = [x for x in order if x not in LEVELS]
    if bad or not order or len(set(order)) != len(order):
        raise ValueError(f"objective {text!r}: a comma list of levels {', '.join(LEVELS)} (each once), "
                         f"or one of {', '.join(OBJECTIVES)}")
    fixed = [x for x in order if x != "concurrency"]
    if "devices" not in fixed or fixed != [x for x in ("devices", "latency", "bottleneck") if x in fixed]:
        raise ValueError(f"objective {text!r}: devices must come first among devices, latency, bottleneck")
    return order
