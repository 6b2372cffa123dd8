"""Results of placement methods: one type for every method, with status, bound and proof."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import StrEnum
from time import perf_counter

from placer.problem.instance import Instance
from placer.specs.units import LEVEL_UNITS

__all__ = ["Status", "Level", "LEVEL_UNITS", "levels_doc", "Result", "Stage", "route", "stages_of", "hops_of", "evaluate", "unplaced"]


class Status(StrEnum):
    OPTIMAL = "optimal"          # proven optimal (objective == bound)
    FEASIBLE = "feasible"        # a placement, optimality not proven
    INFEASIBLE = "infeasible"    # proven: no placement exists
    UNKNOWN = "unknown"          # no placement found and none ruled out (time limit)
    HEURISTIC = "heuristic"      # a placement from a heuristic that claims nothing


@dataclass(frozen=True)
class Stage:
    index: int
    device: int                  # index into instance.devices
    nodes: tuple[int, ...]


@dataclass(frozen=True)
class Level:
    """One objective level of a lexicographic solve: its value, a bound valid for the exact problem
    (bytes and latencies as given, nothing rounded), and whether the value is proven optimal.

    ``name``: ``devices`` (count; bound is a lower bound), ``concurrency`` (the smallest stage's
    live-request ceiling; bound is an upper bound), ``latency`` (hop latency in us; lower bound),
    ``bottleneck`` (largest weight bytes on a device; lower bound). ``cap``: the level's search
    stopped at this value, the most a workload states (:data:`placer.specs.workload.MAX_CONCURRENCY`
    live requests); the optimum may lie above it (None: the search was not capped). ``note``: why
    a level stands unproven without a search of its own (e.g. the fleet is too large to model its
    hop latency), or how it was proven without one (None: it was searched as usual)."""

    name: str
    value: float | int | None
    bound: float | int | None
    proven: bool
    cap: int | None = None
    note: str | None = None

    def __post_init__(self):
        if self.proven and self.value is not None and self.bound is not None and self.bound != self.value:
            raise ValueError(f"level {self.name}: proven with value {self.value} != bound {self.bound}")

    @property
    def unit(self) -> str:
        """The unit of ``value`` and ``bound``."""
        return LEVEL_UNITS.get(self.name, "")

    def describe(self) -> str:
        """One line: ``"concurrency 37 live requests (bound 40 live requests, not proven)"``, saying
        when the search was capped; exact values (``repr`` of a float, never rounded)."""
        unit = f" {self.unit}" if self.unit and self.name != "devices" else ""
        capped = "" if self.cap is None else f"searched up to the workload limit of {self.cap:,}{unit}, "
        why = "" if self.note is None else f"; {self.note}"
        if self.proven:
            return f"{self.name} {_exact(self.value)}{unit} ({capped}proven{why})"
        if self.bound is None:
            return f"{self.name} {_exact(self.value)}{unit} ({capped}not proven{why})"
        return f"{self.name} {_exact(self.value)}{unit} ({capped}bound {_exact(self.bound)}{unit}, not proven{why})"

    def to_dict(self) -> dict:
        """The level as JSON: name, exact value and bound in ``unit``, proven, and ``cap`` when the
        search was capped, ``note`` when set (a float is written as Python's shortest exact repr, never rounded)."""
        doc = dict(name=self.name, value=_json_number(self.value), unit=self.unit, bound=_json_number(self.bound),
                   proven=bool(self.proven))
        if self.cap is not None:
            doc["cap"] = self.cap
        if self.note is not None:
            doc["note"] = self.note
        return doc


def _exact(x) -> str:
    return "-" if x is None else repr(float(x)) if isinstance(x, float) else str(x)


def _json_number(x):
    """``x`` for JSON: ints stay ints, a float with an integer value stays a float, inf and nan
    become None (JSON has neither)."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


@dataclass(frozen=True)
class Result:
    """What every method returns.

    ``assignment[i]`` is the device index (into ``instance.devices``) of node ``i``; ``order`` lists
    the used devices in pipeline order (first visit). ``bound`` is a proven lower bound on the
    device count; ``proven_optimal`` is true only when a method proved devices (and, for CP-SAT,
    every level) optimal. ``levels``: the objective levels solved, in order, each with its own
    proof (see :class:`Level`; dp states its path's hop latency too);
    ``interrupted``: the search was stopped by Ctrl-C (the placement is the best so far).
    """

    method: str
    mode: str
    status: Status
    assignment: tuple[int, ...] | None = None
    devices_used: int | None = None
    hops: int | None = None
    hop_latency_us: float | None = None
    lower_bound_devices: int | None = None
    objective: float | None = None
    bound: float | None = None
    proven_optimal: bool = False
    gap: float | None = None
    seconds: float = 0.0
    concurrency_ceiling: int | None = None
    message: str = ""
    max_concurrency: int | None = None
    order: tuple[int, ...] | None = None
    levels: tuple[Level, ...] = ()
    interrupted: bool = False
    stats: dict = field(default_factory=dict)

    @property
    def feasible(self) -> bool:
        return self.assignment is not None

    def level(self, name: str) -> Level | None:
        """The level called ``name``, or None when it was not solved."""
        return next((lv for lv in self.levels if lv.name == name), None)

    @property
    def devices_proven(self) -> bool:
        """The device count is proven minimal: it meets the proven lower bound, every level is
        proven, or the device level of a lexicographic solve is."""
        if self.devices_used is None:
            return False
        if self.proven_optimal or self.devices_used == self.lower_bound_devices:
            return True
        level = self.level("devices")
        return level is not None and level.proven

    def replace(self, **changes) -> Result:
        return replace(self, **changes)


def levels_doc(result: Result) -> list[dict]:
    """Every level of ``result`` as JSON (:meth:`Level.to_dict`), in the order solved. A method
    that states no levels gets its device count as the one level, proven only when it meets the
    proven lower bound; no placement, no levels."""
    if result.levels:
        return [lv.to_dict() for lv in result.levels]
    if result.devices_used is None:
        return []
    lb = result.lower_bound_devices
    proven = lb is not None and result.devices_used <= lb
    return [Level("devices", result.devices_used, result.devices_used if proven else lb, proven).to_dict()]


def route(instance: Instance, assignment) -> list[int]:
    """Device index of every node in pipeline (topological) order."""
    return [assignment[i] for i in range(instance.n_nodes)]


def stages_of(instance: Instance, assignment) -> list[Stage]:
    """Used devices in order of first visit, each with the nodes it holds."""
    order: list[int] = []
    held: dict[int, list[int]] = {}
    for i in range(instance.n_nodes):
        d = assignment[i]
        if d not in held:
            held[d] = []
            order.append(d)
        held[d].append(i)
    return [Stage(k, d, tuple(held[d])) for k, d in enumerate(order)]


def hops_of(instance: Instance, assignment) -> tuple[int, float]:
    """(hops, hop latency in us): graph edges whose ends sit on different devices.

    On a chain this is the number of consecutive route entries on different devices. Latency is the
    direct link's when there is one, else the fleet's shortest path.
    """
    return instance.hops(assignment)


def evaluate(instance: Instance, assignment, *, method: str, status: Status, seconds: float = 0.0,
             lower_bound: int | None = None, **extra) -> Result:
    """A :class:`Result` for ``assignment`` with devices, hops, latency and concurrency ceiling filled in."""
    assignment = tuple(int(a) for a in assignment)
    stages = stages_of(instance, assignment)
    hops, lat = hops_of(instance, assignment)
    ceilings = [instance.max_concurrency(s.nodes, s.device) for s in stages]
    finite = [c for c in ceilings if c is not None]
    ceiling = min(finite) if finite else None
    return Result(method=method, mode=instance.mode, status=status, assignment=assignment,
                  devices_used=len(stages), hops=hops, hop_latency_us=lat, lower_bound_devices=lower_bound,
                  seconds=seconds, concurrency_ceiling=ceiling, **extra)


def unplaced(method: str, instance: Instance, *, since: float, lower_bound: int | None):
    """The answer of a method that places nothing: a function ``(message, status=UNKNOWN, **fields)
    -> Result`` with the method, the mode, ``lower_bound`` and the seconds since ``since``
    (``time.perf_counter()``) filled in."""
    def result(message: str, status: Status = Status.UNKNOWN, **fields) -> Result:
        return Result(method, instance.mode, status, lower_bound_devices=lower_bound, message=message,
                      seconds=perf_counter() - since, **fields)
    return result
