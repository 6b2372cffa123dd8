"""Planning questions answered with repeated solves: budgets and replicas.

* :func:`min_devices` solves one instance with the method that suits its mode and never raises
  for an impossible request (the :class:`~placer.problem.placement.Result` says ``infeasible``).
* :func:`largest_concurrency`: the largest live-request count that fits in a device budget, by
  exponential then binary search over concurrency (the minimum device count never falls as
  concurrency grows, so bisection is exact with an exact method).
* :func:`plan_replicas`: the fewest total devices that hold ``N`` live requests with ``k``
  identical pipeline replicas of ``ceil(N / k)`` requests each, for every useful ``k``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from placer.algorithms.registry import EXACT_METHODS
from placer.algorithms.search import largest_true
from placer.planning.requirements import SEARCH_METHOD, SolverSettings
from placer.planning.solve import place_instance
from placer.problem.instance import Instance
from placer.problem.placement import Result, Status
from placer.specs.errors import ARGUMENT, InvalidSpec
from placer.specs.units import plural

__all__ = [
    "EXACT_METHODS",
    "default_method",
    "solver_options",
    "min_devices",
    "device_lower_bound",
    "BudgetSearch",
    "largest_concurrency",
    "ReplicaOption",
    "ReplicaPlan",
    "plan_replicas",
]



def default_method(mode: str) -> str:
    """The method a search of many solves uses in ``mode`` (:data:`placer.planning.requirements.SEARCH_METHOD`):
    the exact chain DP for contiguous placement, CP-SAT for the other modes."""
    return SEARCH_METHOD[mode]


def solver_options(method: str, *, time_limit: float | None = None, seed: int | None = None,
                   threads: int | None = None, objective: str | None = None) -> dict:
    """Keyword options for ``place(..., method=method)``: only CP-SAT takes a time limit, seed,
    worker count and objective (``"devices"``: fewest devices only; default: devices, then hop
    latency). None values are left to the solver's defaults."""
    if method != "cpsat":
        return {}
    # "lex" is CP-SAT's default; left out so place() need not know the option
    given = dict(time_limit=time_limit, seed=seed, threads=threads,
                 objective=None if objective == "lex" else objective)
    return {k: v for k, v in given.items() if v is not None}


def min_devices(instance: Instance, method: str | None = None, *, time_limit: float | None = None,
                seed: int | None = None, threads: int | None = None, objective: str | None = None) -> Result:
    """Solve ``instance`` (fewest devices) by :func:`placer.planning.solve.place_instance`, in
    groups for a degree above 1; an impossible request becomes an ``infeasible`` Result. Ctrl-C
    during a solve raises :class:`KeyboardInterrupt`, even when the solver caught it."""
    method = method or default_method(instance.mode)
    settings = SolverSettings(method=method, time_limit=30.0 if time_limit is None else time_limit,
                              seed=seed or 0, threads=threads or 2)
    # CP-SAT turns Ctrl-C into its best placement so far; a plan or sweep must not take that for
    # the point's answer (a resumed sweep would never solve it again)
    return place_instance(instance, settings, reports=False, keep_interrupted=False,
                          objective=None if objective in (None, "lex") else objective).per_group


def device_lower_bound(result: Result) -> int | None:
    """A proven lower bound on the device count carried by ``result`` (its count when proven optimal)."""
    if result.feasible and result.proven_optimal:
        return result.devices_used
    bounds = [b for b in (result.lower_bound_devices,
                          None if result.bound is None else math.ceil(result.bound - 1e-9)) if b is not None]
    return max(bounds) if bounds else None


def _fits(result: Result, budget: int) -> tuple[bool, bool]:
    """(fits within ``budget`` devices, whether that answer is proven)."""
    if result.feasible and result.devices_used <= budget:
        return True, True                      # a placement is its own proof
    if result.status == Status.INFEASIBLE:
        return False, True
    lb = device_lower_bound(result)
    if lb is not None and lb > budget:
        return False, True
    return False, False                        # no placement found within the budget, none ruled out


@dataclass(frozen=True)
class BudgetSearch:
    """Outcome of :func:`largest_concurrency`.

    ``concurrency`` fits in ``budget_devices`` (placed by ``result``, or 0 when not even one
    request fits); ``concurrency + 1`` does not (``next_result``, or None when the fleet's
    concurrency cap already rules it out). ``proven`` is false when a solve neither found a
    placement within the budget nor ruled one out (a time limit), so a larger value may fit.
    """

    budget_devices: int
    concurrency: int
    result: Result | None
    next_result: Result | None
    solves: int
    proven: bool
    method: str
    seconds: float = 0.0


def largest_concurrency(instance: Instance, budget_devices: int, *, method: str | None = None,
                        max_concurrency: int | None = None, **options) -> BudgetSearch:
    """The largest concurrency whose minimum device count is at most ``budget_devices``.

    Exponential search (1, 2, 4, ...) until a value does not fit, then binary search between the
    last fit and the first miss: O(log c) solves. ``max_concurrency`` caps the search (values
    above it are taken not to fit without solving); by default the cap is the concurrency above
    which some node fits on no device even alone. Needs an exact method
    (``dp`` or ``cpsat``); ``options`` go to CP-SAT (time_limit, seed, threads).
    """
    method = method or default_method(instance.mode)
    if method not in EXACT_METHODS:
        raise InvalidSpec(ARGUMENT, "method",
                          f"a budget search needs an exact method ({' or '.join(EXACT_METHODS)}), got {method!r}")
    if budget_devices < 1:
        raise InvalidSpec(ARGUMENT, "budget", "must be at least 1 device")
    cap = 10**9 if max_concurrency is None else max_concurrency
    if max_concurrency is None:
        ceiling = _fleet_ceiling(instance)
        if ceiling is not None:
            cap = min(cap, ceiling)
    results: dict[int, Result] = {}
    proven = True
    seconds = 0.0

    def fits(c: int) -> bool:
        nonlocal proven, seconds
        if c > cap:
            return False
        r = min_devices(instance.with_concurrency(c), method, **options)
        results[c] = r
        seconds += r.seconds
        ok, sure = _fits(r, budget_devices)
        proven = proven and sure
        return ok

    lo, _ = largest_true(fits, 1, max(cap, 1))
    if lo is None:
        return BudgetSearch(budget_devices, 0, None, results.get(1), len(results), proven, method, seconds)
    return BudgetSearch(budget_devices, lo, results[lo], results.get(lo + 1), len(results), proven, method,
                        seconds)


def _fleet_ceiling(instance: Instance) -> int | None:
    """Above this concurrency some node fits on no device even alone (None: no per-request memory)."""
    cmax = max(instance.capacity_bytes)
    per_node = [(cmax - w) // r for w, r in zip(instance.weight_bytes, instance.request_bytes) if r > 0]
    return max(min(per_node), 0) if per_node else None


@dataclass(frozen=True)
class ReplicaOption:
    """``replicas`` identical pipelines of ``replica_concurrency`` live requests each."""

    replicas: int
    replica_concurrency: int
    devices_per_replica: int | None
    total_devices: int | None
    status: str
    proven: bool
    fits_fleet: bool
    seconds: float = 0.0
    message: str = ""

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class ReplicaPlan:
    """All useful replica counts for ``total_concurrency`` live requests, and the winner."""

    total_concurrency: int
    fleet_devices: int
    method: str
    mode: str
    options: tuple[ReplicaOption, ...]
    best: ReplicaOption | None
    stop_reason: str
    notes: tuple[str, ...] = field(default=())

    @property
    def single(self) -> ReplicaOption | None:
        """The one-pipeline option (k = 1)."""
        return next((o for o in self.options if o.replicas == 1), None)

    @property
    def saving_devices(self) -> int | None:
        """Devices the winner saves against one pipeline (None when one pipeline is impossible)."""
        one = self.single
        if self.best is None or one is None or one.total_devices is None or not one.fits_fleet:
            return None
        return one.total_devices - self.best.total_devices

    @property
    def tied(self) -> tuple[ReplicaOption, ...]:
        """Other replica counts that fit the fleet with exactly the winner's total; the winner is the
        one with the fewest replicas (fewer, larger pipelines: less to deploy and keep in step)."""
        if self.best is None:
            return ()
        return tuple(o for o in self.options if o is not self.best and o.fits_fleet
                     and o.total_devices == self.best.total_devices)

    def summary(self) -> str:
        if self.best is None:
            return (f"no replica count holds {self.total_concurrency} live requests on the "
                    f"{self.fleet_devices}-device fleet")
        b, one = self.best, self.single
        text = (f"{plural(b.replicas, 'replica')} of {b.replica_concurrency} live requests: "
                f"{b.total_devices} devices ({b.replicas} x {b.devices_per_replica})")
        saving = self.saving_devices
        tied = self.tied
        if tied:
            counts = " and ".join(f"{o.replicas} replicas ({o.replicas} x {o.devices_per_replica})" for o in tied)
            text += (f"; a tie with {counts}: the same {b.total_devices} devices, broken in favour of the "
                     f"fewest replicas")
        elif saving is None:
            text += "; one pipeline cannot hold them on this fleet"
        elif b.replicas == 1:
            runner = min((o for o in self.options if o.replicas > 1 and o.total_devices is not None),
                         key=lambda o: o.total_devices, default=None)
            if runner is not None:
                text += (f"; one pipeline wins by {plural(runner.total_devices - b.total_devices, 'device')} over "
                         f"{runner.replicas} replicas")
            else:
                text += "; no split into replicas can use fewer"
        else:
            pct = 100.0 * saving / one.total_devices
            text += f"; saves {plural(saving, 'device')} ({pct:.1f}%) against one pipeline of {one.total_devices}"
        if not b.proven:
            text += " (device counts not all proven optimal)"
        return text

    def to_dict(self) -> dict:
        return {"total_concurrency": self.total_concurrency, "fleet_devices": self.fleet_devices,
                "method": self.method, "mode": self.mode,
                "rows": [o.to_dict() for o in self.options],
                "best_replicas": None if self.best is None else self.best.replicas,
                "best_total_devices": None if self.best is None else self.best.total_devices,
                "saving_devices": self.saving_devices, "stop_reason": self.stop_reason,
                "tied_replicas": [o.replicas for o in self.tied], "tie_break": "fewest replicas",
                "summary": self.summary()}


def plan_replicas(instance: Instance, total_concurrency: int, *, method: str | None = None,
                  solve=None, progress=None, **options) -> ReplicaPlan:
    """Fewest total devices holding ``total_concurrency`` live requests with ``k`` identical replicas.

    For ``k = 1, 2, ...`` each replica holds ``ceil(N / k)`` requests and needs ``m(ceil(N / k))``
    devices, ``k x m`` in all; a ``k`` whose replica concurrency equals the previous one's is
    skipped (same replicas, more of them). The scan stops once ``k x m(1)``, a proven lower bound
    for every larger ``k``, reaches the best total found or exceeds the fleet; at that point the
    replica count has stopped falling. The replicas are taken to run on interchangeable devices
    (each replica is solved on the whole fleet; the total is then checked against the fleet size).
    ``solve(instance) -> Result`` replaces :func:`min_devices` (used by the sweep to share solves).
    ``progress(option)`` is called with each :class:`ReplicaOption` as it is solved.
    """
    if total_concurrency < 1:
        raise InvalidSpec(ARGUMENT, "total_concurrency", "must be at least 1")
    method = method or default_method(instance.mode)
    n_dev = instance.n_devices
    cache: dict[int, Result] = {}

    def m(c: int) -> Result:
        if c not in cache:
            cache[c] = solve(instance.with_concurrency(c)) if solve else min_devices(
                instance.with_concurrency(c), method, **options)
        return cache[c]

    floor_result = m(1)
    floor = device_lower_bound(floor_result) if floor_result.status != Status.INFEASIBLE else None
    options_out: list[ReplicaOption] = []
    best: ReplicaOption | None = None
    stop = "every replica count up to the total concurrency was tried"
    prev_c = None
    for k in range(1, total_concurrency + 1):
        c = -(-total_concurrency // k)
        if c == prev_c:
            continue
        prev_c = c
        if floor_result.status == Status.INFEASIBLE:
            options_out.append(_option(k, c, floor_result, n_dev))
            stop = "one live request does not fit on the fleet"
            break
        if floor is not None and k > 1 and k * floor > n_dev:
            stop = f"{k} replicas need at least {k * floor} devices; the fleet has {n_dev}"
            break
        if floor is not None and best is not None and k * floor >= best.total_devices:
            stop = (f"{k} replicas need at least {k} x {floor} = {k * floor} devices, "
                    f"no fewer than the best found ({best.total_devices})")
            break
        opt = _option(k, c, m(c), n_dev)
        options_out.append(opt)
        if progress is not None:
            progress(opt)
        if opt.total_devices is not None and opt.fits_fleet and (
                best is None or opt.total_devices < best.total_devices):
            best = opt
    used_method = next((r.method for r in cache.values()), method)
    return ReplicaPlan(total_concurrency, n_dev, used_method, instance.mode, tuple(options_out), best, stop)


def _option(k: int, c: int, r: Result, n_dev: int) -> ReplicaOption:
    if not r.feasible:
        return ReplicaOption(k, c, None, None, str(r.status), False, False, r.seconds, r.message)
    total = k * r.devices_used
    return ReplicaOption(k, c, r.devices_used, total, str(r.status), bool(r.proven_optimal),
                         total <= n_dev, r.seconds, r.message)
