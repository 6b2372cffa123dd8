"""The opening every placement heuristic and the chain DP share: the clock, the device lower bound,
the answer when nothing is placed, the refusal of a mode the method does not place in, and for a
free-mode method on a fleet cut into pieces, its answer piece by piece."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from time import perf_counter

from placer.algorithms.bound import lower_bound as compute_lower_bound
from placer.algorithms.pins import ChainPins, PinConflict, chain_pins
from placer.algorithms.reach import in_pieces, pieces
from placer.problem.instance import Instance
from placer.problem.placement import Result, Status, unplaced

__all__ = ["Opening", "open_method"]


@dataclass(frozen=True)
class Opening:
    """``t0`` (``perf_counter()`` at the start), ``lower_bound`` (devices), ``give_up(message,
    status=UNKNOWN)`` -> a no-placement Result, ``refusal`` (the Result to return at once, or None)
    and, for a method of contiguous stages, the chain's ``pins``."""

    t0: float
    lower_bound: int | None
    give_up: Callable[..., Result]
    refusal: Result | None = None
    pins: ChainPins | None = None


def open_method(name: str, instance: Instance, lower_bound: int | None, *, contiguous: bool,
                per_piece=None) -> Opening:
    """The opening of method ``name`` on ``instance``: ``contiguous`` methods place stages of
    consecutive nodes (free mode refused; pins read along the chain, a conflict is infeasible),
    the others place in free mode only, and on a fleet cut into pieces answer with ``per_piece``
    (the method itself, :func:`placer.algorithms.reach.in_pieces`: linked nodes must stay where
    they can reach each other) when given. ``lower_bound``: the device lower bound when already known."""
    t0 = perf_counter()
    lb = compute_lower_bound(instance) if lower_bound is None else lower_bound
    give_up = unplaced(name, instance, since=t0, lower_bound=lb)
    if not contiguous:
        refusal = None if instance.mode == "free" else \
            give_up(f"{name} ignores the pipeline order: it places in free mode only")
        if refusal is None and per_piece is not None and len(pieces(instance)) > 1:
            refusal = in_pieces(instance, per_piece, lb)
        return Opening(t0, lb, give_up, refusal)
    if instance.mode == "free":
        return Opening(t0, lb, give_up, give_up(f"{name} places contiguous stages; use ffd, typepack or cpsat for "
                                                f"free mode"))
    try:
        return Opening(t0, lb, give_up, pins=chain_pins(instance))
    except PinConflict as exc:
        return Opening(t0, lb, give_up, give_up(str(exc), Status.INFEASIBLE))
