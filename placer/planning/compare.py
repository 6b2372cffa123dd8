"""Solve and compare: from a model, a fleet and a workload to placements, mappings and a table.

:func:`solve` builds the instance for one mode, places it with one method and, when there is a
placement, builds its stage mapping. :func:`compare` runs every method in the modes it places in
(the published rule and first-fit decreasing in free mode, greedy and the exact DP in contiguous
mode, CP-SAT in all three modes, and the lower bounds) and returns one row per method and mode
with the field names of ``DESIGN.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from time import perf_counter

from ..algorithms import default_mode, place
from ..algorithms.deadline import interrupt_scope, interrupted
from ..algorithms.objectives import DEFAULT_OBJECTIVE
from ..errors import ARGUMENT, InvalidSpec
from ..fleet import Fleet
from ..groups import default_degrees, node_sizes, per_device
from ..instance import Instance, make_instance
from ..model import LayerGraph
from ..parallel import allowed_degrees
from ..placement import Result
from ..reserve import Reserve
from ..workload import Workload

__all__ = ["Solved", "DegreeSearch", "solve", "solve_degrees", "compare", "compare_degrees", "degree_row",
           "COMPARE_ROWS", "DEGREE_FIELDS", "row_of", "solution_path", "node_ranges",
           "SPLIT_GRANULARITY", "granularity_for"]

SPLIT_GRANULARITY = "shards:4"   # split mode's refinement unless one is asked for

# (method, mode), in the order the table shows them
COMPARE_ROWS = (
    ("typepack", "free"),
    ("ffd", "free"),
    ("greedy", "contiguous"),
    ("pathwalk", "contiguous"),
    ("dp", "contiguous"),
    ("cpsat", "contiguous"),
    ("cpsat", "free"),
    ("cpsat", "split"),
    ("bound", "contiguous"),
    ("bound", "free"),
    ("bound", "split"),
)

ROW_FIELDS = ("method", "mode", "devices_used", "hops", "hop_latency_us", "concurrency_ceiling",
              "lower_bound_devices", "proven_optimal", "status", "seconds")


@dataclass(frozen=True)
class Solved:
    """One solve: the instance, the method's result and (when it placed) the stage mapping."""

    instance: Instance
    result: Result
    mapping: dict | None


def granularity_for(mode: str, granularity: str | None) -> str:
    """The refinement ``mode`` places at: ``granularity`` when given, else split mode's default
    (:data:`SPLIT_GRANULARITY`) or whole layers for the other modes."""
    if granularity is None:
        return SPLIT_GRANULARITY if mode == "split" else "layer"
    return granularity


_granularity = granularity_for


def solve(model: LayerGraph, fleet: Fleet, workload: Workload, *, mode: str | None = None,
          granularity: str | None = None, method: str = "cpsat", pins=(), require=(), tp: int = 1,
          ep: bool = False, reserve: Reserve | None = None, **options) -> Solved:
    """Place ``model`` on ``fleet`` under ``workload``: ``mode`` defaults to the method's own
    (contiguous, or free for typepack and ffd); ``granularity`` applies to split mode (default
    ``shards:4``); ``require``: constraints of :data:`placer.instance.REQUIREMENTS`; every stage is
    a group of ``tp`` devices of one node (``ep``: experts spread whole); ``reserve`` overrides the
    device types' reserves; ``options`` go to the solver (time_limit, seed, workers, progress,
    objective). Device figures of the result count devices (groups x tp)."""
    from ..mapping import build_mapping

    mode = mode or default_mode(method)
    instance = make_instance(model, fleet, workload, mode=mode, granularity=_granularity(mode, granularity),
                             pins=pins, require=require, tp=tp, ep=ep, reserve=reserve)
    result = per_device(place(instance, method, **options), instance)
    return Solved(instance, result, build_mapping(instance, result) if result.feasible else None)


@dataclass(frozen=True)
class DegreeSearch:
    """One solve per allowed degree and the best of them.

    ``best``: fewest devices, then the highest concurrency ceiling, then the least hop latency,
    then the lower degree. ``devices_proven``: the best device count is proven over every degree
    (each degree's device level proven, or the degree proven infeasible); ``proven``: every level
    of every degree proven.
    """

    best: Solved | None
    solved: tuple[Solved, ...]
    refused: dict
    skipped: tuple[int, ...] = ()      # degrees not solved (Ctrl-C stopped the search first)

    @property
    def devices_proven(self) -> bool:
        return not self.skipped and all(s.result.status == "infeasible" or devices_proven(s.result) for s in self.solved)

    @property
    def proven(self) -> bool:
        return not self.skipped and all(s.result.status == "infeasible" or s.result.proven_optimal for s in self.solved)


def _rank(s: Solved):
    r = s.result
    ceiling = r.concurrency_ceiling if r.concurrency_ceiling is not None else float("inf")
    return (r.devices_used, -ceiling, r.hop_latency_us or 0.0, s.instance.tp)


def solve_degrees(model: LayerGraph, fleet: Fleet, workload: Workload, *, degrees=None, ep: bool = False,
                  reserve: Reserve | None = None, on_degree=None, before_degree=None, **kw) -> DegreeSearch:
    """:func:`solve` at each degree of ``degrees`` the model allows (default: :func:`default_degrees`);
    ``before_degree(tp)`` is called before each solve and ``on_degree(tp, solved)`` after it.
    Raises :class:`InvalidSpec` (``--tp``) when the model allows none of them."""
    if degrees is None:
        allowed, refused = default_degrees(model, fleet, ep, workload)
    else:
        allowed, refused = allowed_degrees(model, degrees, ep, workload)
    if not allowed:
        why = "; ".join(f"tp {g}: {r}" for g, r in refused.items())
        raise InvalidSpec(ARGUMENT, "tp", f"{model.name} runs at none of the degrees asked for ({why})")
    with interrupt_scope():     # a Ctrl-C during one degree's solve stops the search before the next
        return _solve_degrees(model, fleet, workload, allowed, refused, ep, reserve, on_degree, before_degree, kw)


def _solve_degrees(model, fleet, workload, allowed, refused, ep, reserve, on_degree, before_degree,
                   kw) -> DegreeSearch:
    sizes = node_sizes(fleet)
    out = []
    skipped: list[int] = []
    for g in allowed:
        if out and (out[-1].result.interrupted or interrupted()):
            skipped.append(g)
            continue
        if g > max(sizes.values()):
            refused[g] = f"no node of {fleet.name} has {g} available devices (the largest has {max(sizes.values())})"
            continue
        if before_degree is not None:
            before_degree(g)
        solved = solve(model, fleet, workload, tp=g, ep=ep, reserve=reserve, **kw)
        out.append(solved)
        if on_degree is not None:
            on_degree(g, solved)
    if not out:
        raise InvalidSpec(ARGUMENT, "tp", "; ".join(f"tp {g}: {r}" for g, r in refused.items()))
    placed = [s for s in out if s.result.feasible]
    best = min(placed, key=_rank) if placed else out[0]
    return DegreeSearch(best, tuple(out), refused, tuple(skipped))


def devices_proven(result: Result) -> bool:
    """Whether the device count is proven minimal (:attr:`placer.placement.Result.devices_proven`)."""
    return result.devices_proven


def row_of(result: Result, **extra) -> dict:
    """A compare row: DESIGN.md's fields, then ``gap``, ``message`` and ``extra``."""
    row = {f: getattr(result, f) for f in ROW_FIELDS}
    row["status"] = str(result.status)
    row["seconds"] = round(float(result.seconds), 3)
    row["gap"] = result.gap
    row["devices_proven"] = devices_proven(result)
    row["message"] = result.message
    row.update(extra)
    return row


def compare(model: LayerGraph, fleet: Fleet, workload: Workload, *, time_limit: float = 30.0, seed: int = 0,
            workers: int = 2, granularity: str | None = None, rows=COMPARE_ROWS, progress=None) -> dict:
    """``{"rows": [...]}``: one row per (method, mode) of ``rows``. ``granularity`` is split mode's
    (default ``shards:4``). ``progress(method, mode)`` is called before each row is solved. After
    Ctrl-C the rows so far come back with ``"interrupted": True``."""
    with interrupt_scope():     # a Ctrl-C noted in one row stays set until the loop has seen it
        return _compare(model, fleet, workload, time_limit, seed, workers, granularity, rows, progress)


def _compare(model, fleet, workload, time_limit, seed, workers, granularity, rows, progress) -> dict:
    out = []
    instances: dict[str, Instance] = {}
    for method, mode in rows:
        try:
            if interrupted():
                return {"rows": out, "interrupted": True}
            if mode not in instances:
                instances[mode] = make_instance(model, fleet, workload, mode=mode,
                                                granularity=_granularity(mode, granularity))
            if progress is not None:
                progress(method, mode)
            if interrupted():       # noted while the row was announced: start no search
                return {"rows": out, "interrupted": True}
            opts = dict(time_limit=time_limit, seed=seed, workers=workers) if method == "cpsat" else {}
            t0 = perf_counter()
            result = place(instances[mode], method, **opts)
        except KeyboardInterrupt:   # Ctrl-C outside the solver's search: the rows so far
            return {"rows": out, "interrupted": True}
        result = result.replace(seconds=max(result.seconds, perf_counter() - t0))
        out.append(row_of(result, granularity=instances[mode].model.granularity))
        if result.interrupted or interrupted():   # Ctrl-C during the search: this row holds its best so far; start no other
            return {"rows": out, "interrupted": True}
    return {"rows": out}


DEGREE_FIELDS = ("tp", "ep", "devices_used", "stages", "devices_proven", "concurrency_ceiling", "hop_latency_us",
                 "proven_optimal", "status", "seconds", "live_requests", "alone_tokens_per_s",
                 "per_user_tokens_per_s", "aggregate_tokens_per_s")


def degree_row(solved: Solved, *, output_tokens: int = 32) -> dict:
    """One row of :func:`compare_degrees` for a solve at one degree: the device figures (in
    devices), the guaranteed concurrency (the ceiling every stage holds) and the simulated speed.

    ``alone_tokens_per_s``: one request alone; ``per_user_tokens_per_s`` and
    ``aggregate_tokens_per_s``: ``live_requests`` requests live at once, the workload's concurrency
    (at most the ceiling), each decoding ``output_tokens`` tokens at the workload's context
    (:func:`placer.simulate.simulate`, which costs a group's all-reduces and all-to-alls).
    """
    from ..simulate import simulate

    r, inst = solved.result, solved.instance
    row = dict.fromkeys(DEGREE_FIELDS)
    row.update(tp=inst.tp, ep=inst.tp if inst.ep else 1, devices_used=r.devices_used,
               stages=r.stats.get("groups_used", r.devices_used) if r.feasible else None,
               devices_proven=devices_proven(r), concurrency_ceiling=r.concurrency_ceiling,
               hop_latency_us=r.hop_latency_us, proven_optimal=r.proven_optimal, status=str(r.status),
               seconds=round(float(r.seconds), 3), message=r.message)
    if not r.feasible:
        return row
    ceiling = r.concurrency_ceiling
    live = max(1, inst.workload.concurrency if ceiling is None else min(inst.workload.concurrency, ceiling))
    alone = simulate(inst, r.assignment, requests=1, max_live=1, output_tokens=output_tokens)
    loaded = simulate(inst, r.assignment, requests=live, max_live=live, output_tokens=output_tokens)
    row.update(live_requests=live, alone_tokens_per_s=alone.per_user_tokens_per_s,
               per_user_tokens_per_s=loaded.per_user_tokens_per_s,
               aggregate_tokens_per_s=loaded.aggregate_tokens_per_s)
    return row


def compare_degrees(model: LayerGraph, fleet: Fleet, workload: Workload, *, degrees=None, ep: bool | None = None,
                    reserve: Reserve | None = None, time_limit: float = 30.0, seed: int = 0, workers: int = 2,
                    output_tokens: int = 32, objective: str | None = None, progress=None) -> dict:
    """``{"degrees": [...], "refused": [{"tp", "ep", "reason"}]}``: for each allowed
    tensor-parallel degree (``degrees``, default :func:`placer.groups.default_degrees`), the proven
    fewest devices, the guaranteed concurrency and the simulated speed (:func:`degree_row`), in
    contiguous mode, CP-SAT with ``objective`` (default ``placer solve``'s levels: devices,
    concurrency, hop latency with the groups' collectives).

    ``ep``: None lists tensor-split experts and, for degrees above 1, expert parallelism on an MoE
    model (tensor split only on a dense one); True or False lists only that one. ``progress(tp,
    ep)`` is called before each degree is solved. After Ctrl-C the rows so far come back with
    ``"interrupted": True``. Raises :class:`InvalidSpec` (``--tp``) when no degree asked runs.
    """
    from .speed import has_experts

    variants = [False, True] if ep is None and has_experts(model) else [bool(ep)]
    rows: list[dict] = []
    refused: list[dict] = []

    def out(stopped: bool = False) -> dict:
        doc = {"degrees": rows, "refused": sorted(refused, key=lambda r: (r["tp"], r["ep"]))}
        if stopped:
            doc["interrupted"] = True
        return doc

    for expert in variants:
        optional = expert and ep is None
        asked = degrees
        if asked is None:
            asked, why = default_degrees(model, fleet, expert, workload)
            asked = asked + list(why)
        if optional:
            asked = [g for g in asked if g > 1]      # EP over one device is tensor split at degree 1
            if not asked:
                continue

        def on_degree(g, solved):
            rows.append(degree_row(solved, output_tokens=output_tokens))

        def start(g, expert=expert):
            if progress is not None:
                progress(g, expert)

        try:
            search = solve_degrees(model, fleet, workload, degrees=asked, ep=expert, reserve=reserve,
                                   time_limit=time_limit, seed=seed, workers=workers, on_degree=on_degree,
                                   before_degree=start, objective=objective or DEFAULT_OBJECTIVE)
        except InvalidSpec:
            if optional:
                continue                              # the experts spread at none of the degrees asked
            raise
        except KeyboardInterrupt:
            return out(True)
        refused.extend({"tp": g, "ep": expert, "reason": why} for g, why in search.refused.items())
        if search.skipped or any(s.result.interrupted for s in search.solved) or interrupted():
            return out(True)
    return out()


def solution_path(model_name: str, hardware_name: str, mode: str) -> str:
    """Where ``placer solve`` writes a mapping unless told otherwise."""
    return f"solutions/{model_name}__{hardware_name}__{mode}.json"


def node_ranges(instance: Instance, nodes) -> str:
    """Node indices as runs of names: ``layers.0-2, layers.5``; refined nodes as ``a..b``."""
    nodes = sorted(nodes)
    runs: list[tuple[int, int]] = []
    for i in nodes:
        if runs and runs[-1][1] == i - 1:
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))
    parts = []
    for lo, hi in runs:
        a, b = instance.nodes[lo], instance.nodes[hi]
        if lo == hi:
            parts.append(a.name)
        elif a.name == f"layers.{a.index}" and b.name == f"layers.{b.index}":
            parts.append(f"layers.{a.index}-{b.index}")
        else:
            parts.append(f"{a.name}..{b.name}")
    return ", ".join(parts)
