"""Sweeps: solve a grid of workloads for one model on one fleet, in parallel, resumably.

A grid is the product of modes, tensor-parallel degrees, contexts, weight and KV precisions, and either concurrencies
(one solve per point: the minimum devices) or device budgets (one bisection per point: the
largest concurrency that fits, :func:`placer.planning.budget.largest_concurrency`). Points run in worker
processes (``backend="process"``), in this process (``jobs=1``), or as Ray tasks
(``backend="ray"``), by :func:`placer.planning.tasks.run_tasks`. Every finished point is
appended to the CSV at once (flushed and synced), so
an interrupted sweep loses nothing; a re-run with the same file solves only the points it lacks.
When the sweep ends the file is rewritten in grid order with the Pareto-optimal points marked.
"""

from __future__ import annotations

import csv
import hashlib
import io
import itertools
import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from placer.planning.budget import (
    EXACT_METHODS,
    default_method,
    device_lower_bound,
    largest_concurrency,
    plan_replicas,
)
from placer.planning.requirements import Placement, Requirements, SolverSettings, granularity_for
from placer.planning.solve import build_instance, place_instance
from placer.planning.tasks import check_backend, run_tasks
from placer.problem.instance import MODES
from placer.problem.placement import Result, Status
from placer.problem.reductions.tensor_parallel import per_device
from placer.specs.errors import ARGUMENT, InfeasiblePlacement, InvalidSpec, PlacerError
from placer.specs.fleet import Fleet
from placer.specs.model import LayerGraph
from placer.specs.spec_io import atomic_write_text
from placer.specs.workload import Workload, workload_for

__all__ = [
    "COLUMNS",
    "Point",
    "Grid",
    "SweepSettings",
    "SweepReport",
    "solve_point",
    "run_sweep",
    "read_rows",
    "pareto_mask",
    "mark_pareto",
    "point_key",
    "row_key",
]

# One row per grid point. Types for reading back: i = int, f = float, b = bool, s = str.
_COLUMN_TYPES = {
    "setup": "s", "model": "s", "hardware": "s", "fleet_devices": "i", "method": "s", "mode": "s", "tp": "i",
    "context_tokens": "i", "weight_bits": "i", "kv_bits": "i", "concurrency": "i", "budget_devices": "i",
    "status": "s", "proven_optimal": "b", "devices_proven": "b", "devices_used": "i", "lower_bound_devices": "i", "hops": "i",
    "hop_latency_us": "f", "concurrency_ceiling": "i", "per_user_tokens_per_s": "f",
    "aggregate_tokens_per_s": "f", "tokens_per_s_per_mw": "f", "replicas_best": "i",
    "replicas_total_devices": "i", "replicas_saving_devices": "i", "solves": "i", "seconds": "f",
    "pareto": "b", "error": "s",
    # a simulated point's traffic line, its speeds' calibrated error band, its $/million tokens and
    # where the price comes from (each device at its type's price)
    "traffic": "s", "error_band": "s", "usd_per_million_tokens": "f", "price_source": "s",
}
COLUMNS = tuple(_COLUMN_TYPES)
# columns a results file of an earlier version may lack (tp: every row tp 1; the rest empty)
_ADDED_LATER = ("tp", "traffic", "error_band", "usd_per_million_tokens", "price_source")
_FEASIBLE = {str(Status.OPTIMAL), str(Status.FEASIBLE), str(Status.HEURISTIC)}
_RETRY = {"error", "unknown"}   # statuses --retry-failed solves again


@dataclass(frozen=True)
class Point:
    """One grid point. ``concurrency`` is set for a plain solve, ``budget_devices`` for a bisection."""

    mode: str
    context_tokens: int
    weight_bits: int
    kv_bits: int
    concurrency: int | None = None
    budget_devices: int | None = None
    tp: int = 1                 # devices per stage (a group of one node); budgets count devices


@dataclass(frozen=True)
class Grid:
    """The values to sweep; ``None`` precisions mean the model's default workload; ``tps``: the
    tensor-parallel degrees (every stage a group of that many devices of one node)."""

    contexts: tuple[int, ...]
    concurrencies: tuple[int, ...] = ()
    modes: tuple[str, ...] = ("contiguous",)
    weight_bits: tuple[int, ...] | None = None
    kv_bits: tuple[int, ...] | None = None
    budgets: tuple[int, ...] = ()
    tps: tuple[int, ...] = (1,)

    def __post_init__(self):
        if not self.contexts:
            raise InvalidSpec(ARGUMENT, "context", "give at least one context length")
        for m in self.modes:
            if m not in MODES:
                raise InvalidSpec(ARGUMENT, "mode", f"unknown mode {m!r} (use {', '.join(MODES)})")
        if not self.budgets and not self.concurrencies:
            raise InvalidSpec(ARGUMENT, "concurrency", "give concurrencies or --budget")
        if any(c < 0 for c in self.concurrencies):
            raise InvalidSpec(ARGUMENT, "concurrency", "must not be negative")
        if any(b < 1 for b in self.budgets):
            raise InvalidSpec(ARGUMENT, "budget", "must be at least 1 device")
        if not self.tps or any(g < 1 for g in self.tps):
            raise InvalidSpec(ARGUMENT, "tp", "a degree is a positive integer")
        if any(g > 1 for g in self.tps) and "split" in self.modes:
            raise InvalidSpec(ARGUMENT, "tp", "split mode cuts layers itself and runs at --tp 1; sweep it apart")

    def points(self, base: Workload) -> list[Point]:
        """Every point in a fixed order (mode, degree, precisions, context, concurrency or budget)."""
        wbits = self.weight_bits or (base.weight_bits,)
        kbits = self.kv_bits or (base.kv_bits,)
        out = []
        for mode, tp, wb, kb, ctx in itertools.product(self.modes, self.tps, wbits, kbits, self.contexts):
            if self.budgets:
                out.extend(Point(mode, ctx, wb, kb, None, b, tp) for b in self.budgets)
            else:
                out.extend(Point(mode, ctx, wb, kb, c, None, tp) for c in self.concurrencies)
        return list(dict.fromkeys(out))


@dataclass(frozen=True)
class SweepSettings:
    """Everything about a sweep except the grid. ``method=None`` picks dp / cpsat by mode."""

    method: str | None = None
    time_limit: float | None = 30.0
    seed: int | None = None
    solver_threads: int | None = None
    objective: str | None = None
    granularity: str | None = None      # split points' refinement (default SPLIT_GRANULARITY)
    constraints: tuple[str, ...] = ()   # names of placer.problem.instance.REQUIREMENTS, on every point
    runtime: str | None = None          # a runtime's rules on every point (contiguous points only)
    simulate: bool = False
    simulate_output_tokens: int | None = None      # None: the traffic's (the standard 1k unless told)
    # the traffic every simulated point serves (placer.simulate.arguments.Traffic; None: the default),
    # at the point's own context and concurrency
    simulate_traffic: object = None
    replicas: bool = False
    concurrency_cap: int | None = None
    base_workload: Workload | None = None
    retry_failed: bool = False          # solve again the points a results file holds as error or unknown

    def method_for(self, mode: str) -> str:
        return self.method or default_method(mode)

    def solver_kwargs(self) -> dict:
        return dict(time_limit=self.time_limit, seed=self.seed, threads=self.solver_threads,
                    objective=self.objective)

    def requirements(self, mode: str) -> Requirements:
        """The requirements of a point in ``mode`` (the refinement applies to split points only)."""
        return Requirements(Placement(mode=mode, granularity=self.granularity if mode == "split" else None,
                                      constraints=self.constraints, runtime=self.runtime))

    def solver(self) -> SolverSettings:
        return SolverSettings(method=self.method, time_limit=30.0 if self.time_limit is None else self.time_limit,
                              seed=self.seed or 0, threads=self.solver_threads or 2)


def setup_id(model: LayerGraph, fleet: Fleet, settings: SweepSettings, base: Workload) -> str:
    """Short hash of what every row of one results file shares (model, fleet, fixed workload)."""
    fixed = {k: v for k, v in base.to_dict().items()
             if k not in ("context_tokens", "concurrency", "weight_bits", "kv_bits")}
    doc = {"model": [model.name, model.sha256], "fleet": [fleet.name, fleet.sha256,
           [d.id for d in fleet.available]], "granularity": granularity_for("split", settings.granularity),
           "workload": fixed}
    if settings.constraints:
        doc["constraints"] = list(settings.constraints)
    if settings.runtime:
        doc["runtime"] = settings.runtime
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:12]


def point_key(setup: str, method: str, p: Point) -> tuple:
    """Identity of a point in a results file: the grid values (budget rows: the budget, not the result)."""
    return (setup, method, p.mode, p.context_tokens, p.weight_bits, p.kv_bits,
            None if p.budget_devices is not None else p.concurrency, p.budget_devices, p.tp)


def row_key(row: dict) -> tuple:
    budget = row.get("budget_devices")
    return (row["setup"], row["method"], row["mode"], row["context_tokens"], row["weight_bits"],
            row["kv_bits"], None if budget is not None else row["concurrency"], budget, row.get("tp") or 1)


# ----------------------------------------------------------------------------- one point
def solve_point(model: LayerGraph, fleet: Fleet, settings: SweepSettings, point: Point,
                setup: str = "") -> dict:
    """Solve one grid point; never raises: a failure becomes a row with ``status="error"``.

    At ``point.tp`` > 1 every stage is a group of that many devices of one node
    (:func:`placer.problem.instance.make_instance`); device figures count devices, a budget too."""
    t0 = time.perf_counter()
    method = settings.method_for(point.mode)
    base = settings.base_workload or workload_for(model)
    row = dict.fromkeys(COLUMNS)
    row.update(setup=setup, model=model.name, hardware=fleet.name, fleet_devices=len(fleet.available),
               method=method, mode=point.mode, tp=point.tp, context_tokens=point.context_tokens,
               weight_bits=point.weight_bits, kv_bits=point.kv_bits, concurrency=point.concurrency,
               budget_devices=point.budget_devices, pareto=False)
    tp = point.tp
    try:
        wl = base.replace(context_tokens=point.context_tokens, weight_bits=point.weight_bits,
                          kv_bits=point.kv_bits, concurrency=point.concurrency or 0,
                          # a weight-bits grid value other than the base's overrides the stored formats
                          weights_as_stored=base.weights_as_stored and point.weight_bits == base.weight_bits)
        inst = build_instance(model, fleet, wl, settings.requirements(point.mode), method=method, tp=tp)
        kw = settings.solver_kwargs()
        if point.budget_devices is not None:
            if point.budget_devices < tp:
                raise InfeasiblePlacement(f"a budget of {point.budget_devices} devices holds no group of {tp}")
            search = largest_concurrency(inst, point.budget_devices // tp, method=method,
                                         max_concurrency=settings.concurrency_cap, **kw)
            inst = inst.with_concurrency(search.concurrency)
            result = None if search.result is None else per_device(search.result, inst)
            row.update(concurrency=search.concurrency, solves=search.solves)
            if result is None:
                row.update(status="infeasible", proven_optimal=search.proven,
                           error=f"one live request needs more than {point.budget_devices} devices")
            else:
                _fill(row, inst, result)
                if not search.proven:
                    row["error"] = "a solve hit its time limit; a larger concurrency may fit"
        else:
            cache: dict[int, Result] = {}
            solver = settings.solver()

            def solve(instance):
                c = instance.workload.concurrency
                if c not in cache:
                    cache[c] = place_instance(instance, solver, method=method, reports=False, keep_interrupted=False,
                                              objective=None if settings.objective in (None, "lex")
                                              else settings.objective).result
                return cache[c]

            result = solve(inst)
            _fill(row, inst, result)
            if settings.replicas and point.concurrency and tp == 1:
                plan = plan_replicas(inst, point.concurrency, method=method, solve=solve)
                if plan.best is not None:
                    row.update(replicas_best=plan.best.replicas, replicas_total_devices=plan.best.total_devices,
                               replicas_saving_devices=plan.saving_devices)
            row["solves"] = len(cache)
        if settings.simulate and row["status"] in _FEASIBLE and row["devices_used"]:
            _simulate_into(row, inst, result, settings.simulate_output_tokens, settings.simulate_traffic)
    except PlacerError as exc:
        row.update(status="infeasible" if isinstance(exc, InfeasiblePlacement) else "error", error=str(exc))
    except Exception as exc:  # a solver bug must not cost the rest of the sweep
        row.update(status="error", error=f"{type(exc).__name__}: {exc}")
    row["seconds"] = round(time.perf_counter() - t0, 4)
    return row


def _fill(row: dict, inst, result: Result) -> None:
    lb = _lower_bound(inst, result)
    row.update(status=str(result.status), proven_optimal=bool(result.proven_optimal),
               devices_proven=result.devices_used is not None and lb is not None and result.devices_used <= lb,
               devices_used=result.devices_used, hops=result.hops,
               hop_latency_us=None if result.hop_latency_us is None else round(result.hop_latency_us, 3),
               concurrency_ceiling=result.concurrency_ceiling, lower_bound_devices=lb)
    if result.status == Status.UNKNOWN:
        row["error"] = result.message or "time limit reached without a placement"
    elif not result.feasible and result.message:
        row["error"] = result.message


def _lower_bound(inst, result: Result) -> int | None:
    """The best proven device lower bound: the result's own (its bound, or its count when proven),
    else the bound module's (in groups of ``inst.tp`` devices, so times ``inst.tp``)."""
    lb = device_lower_bound(result)
    if lb is None:
        try:
            from placer.algorithms.bound import lower_bound
            lb = lower_bound(inst) * inst.tp
        except (ImportError, PlacerError):
            lb = None
    return lb


def _simulate_into(row: dict, inst, result: Result, output_tokens: int | None, traffic=None) -> None:
    """Per-user / aggregate tokens/s and tokens/s per MW from the simulator, when it is installed:
    ``concurrency`` requests of ``traffic`` (default the standard shape at the point's context),
    all live at once, ``output_tokens`` each (None: the traffic's); the run's traffic line, its
    calibrated error band, and $/million tokens of the placement's devices (each at its type's price)."""
    try:
        from placer.simulate import Traffic, simulate
    except ImportError:
        return
    from placer.planning.price import placement_price, usd_per_million_tokens

    live = max(1, inst.workload.concurrency)
    try:
        base = traffic or Traffic()
        sim = simulate(inst, result.assignment,
                       replace(base, requests=live, max_live=live,
                               output_tokens=output_tokens if output_tokens is not None else base.output_tokens))
        price, source = placement_price(inst, result.assignment)
        row.update(per_user_tokens_per_s=_round(sim.per_user_tokens_per_s),
                   aggregate_tokens_per_s=_round(sim.aggregate_tokens_per_s),
                   tokens_per_s_per_mw=_round(sim.tokens_per_s_per_mw),
                   traffic=sim.traffic.describe().removeprefix("traffic: "), error_band=sim.speed_error,
                   usd_per_million_tokens=_round(usd_per_million_tokens(price, sim.aggregate_tokens_per_s)),
                   price_source=source)
    except Exception as exc:  # the placement stands even when its simulation fails
        row["error"] = f"simulation failed: {type(exc).__name__}: {exc}"


def _round(x):
    return None if x is None else round(float(x), 3)


# ----------------------------------------------------------------------------- CSV
def _to_text(v) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _from_text(text: str, kind: str):
    if text == "":
        return None
    if kind == "i":
        return int(text)
    if kind == "f":
        return float(text)
    if kind == "b":
        return text == "true"
    return text


def _csv_line(values: Sequence[str]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(values)
    return buf.getvalue()


def read_rows(path: str | os.PathLike) -> list[dict]:
    """Rows of a results file, typed; a torn last line (a sweep killed mid-write) is dropped."""
    p = Path(path)
    if not p.exists() or p.stat().st_size == 0:
        return []
    text = p.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines = lines[:-1]
    reader = csv.reader(lines)
    header = next(reader, None)
    if header is None:
        return []
    columns = tuple(header)
    if columns != tuple(c for c in COLUMNS if c in columns) or not set(COLUMNS) - set(columns) <= set(_ADDED_LATER):
        raise InvalidSpec(str(p), "header", "not a placer sweep results file (or one of another version); "
                                            "choose another -o")
    rows = []
    for n, values in enumerate(reader, start=2):
        if len(values) != len(columns):
            raise InvalidSpec(str(p), f"line {n}", f"expected {len(columns)} fields, got {len(values)}")
        try:
            row = {c: _from_text(v, _COLUMN_TYPES[c]) for c, v in zip(columns, values)}
        except ValueError as exc:
            raise InvalidSpec(str(p), f"line {n}", str(exc)) from None
        row.setdefault("tp", 1)
        rows.append({c: row.get(c) for c in COLUMNS})
    return rows


def _header(path: Path) -> tuple[str, ...]:
    with open(path, encoding="utf-8", newline="") as fh:
        return tuple(next(csv.reader(fh), ()))


def write_rows(path: str | os.PathLike, rows: Iterable[dict]) -> None:
    """Replace ``path`` atomically with a header and ``rows``."""
    text = _csv_line(COLUMNS) + "".join(_csv_line([_to_text(r.get(c)) for c in COLUMNS]) for r in rows)
    atomic_write_text(path, text)


class _Appender:
    """Appends rows to a results file as they finish: one write, flush and fsync per row."""

    def __init__(self, path: Path):
        self.path = path
        fresh = not path.exists() or path.stat().st_size == 0
        if not fresh and (not path.read_bytes().endswith(b"\n") or _header(path) != COLUMNS):
            # drop a torn last line, and bring a file of an earlier version to today's columns
            write_rows(path, read_rows(path))
        self.fh = open(path, "a", encoding="utf-8", newline="")
        if fresh:
            self._write(_csv_line(COLUMNS))

    def _write(self, text: str) -> None:
        self.fh.write(text)
        self.fh.flush()
        os.fsync(self.fh.fileno())

    def append(self, row: dict) -> None:
        self._write(_csv_line([_to_text(row.get(c)) for c in COLUMNS]))

    def close(self) -> None:
        self.fh.close()


# ----------------------------------------------------------------------------- Pareto
PARETO_MINIMIZE = ("devices_used",)
PARETO_MAXIMIZE = ("concurrency", "context_tokens", "per_user_tokens_per_s")


def pareto_mask(rows: Sequence[dict], minimize: Sequence[str] = PARETO_MINIMIZE,
                maximize: Sequence[str] = PARETO_MAXIMIZE) -> list[bool]:
    """Per row: placed and not dominated by another placed row.

    A row dominates another when it is at least as good in every objective and better in one.
    An objective missing (None) from any placed row is left out for all of them, so a sweep
    without the simulator is judged on devices, concurrency and context alone.
    """
    placed = [i for i, r in enumerate(rows)
              if r.get("status") in _FEASIBLE and r.get("devices_used") is not None]
    keys = [k for k in (*minimize, *maximize) if all(rows[i].get(k) is not None for i in placed)]
    sign = {k: (-1 if k in minimize else 1) for k in keys}
    vec = {i: tuple(sign[k] * rows[i][k] for k in keys) for i in placed}
    mask = [False] * len(rows)
    for i in placed:
        vi = vec[i]
        mask[i] = not any(all(a >= b for a, b in zip(vec[j], vi)) and vec[j] != vi
                          for j in placed if j != i)
    return mask


def mark_pareto(rows: list[dict]) -> list[dict]:
    """Copies of ``rows`` with the ``pareto`` column set."""
    return [dict(r, pareto=m) for r, m in zip(rows, pareto_mask(rows))]


# ----------------------------------------------------------------------------- running
@dataclass
class SweepReport:
    """Rows of the grid (from the file and from this run), in grid order, Pareto points marked."""

    rows: list[dict]
    solved: int
    reused: int
    seconds: float
    backend: str
    jobs: int


def _error_row(model, fleet, settings, point, setup, message) -> dict:
    row = dict.fromkeys(COLUMNS)
    row.update(setup=setup, model=model.name, hardware=fleet.name, fleet_devices=len(fleet.available),
               method=settings.method_for(point.mode), mode=point.mode, tp=point.tp,
               context_tokens=point.context_tokens,
               weight_bits=point.weight_bits, kv_bits=point.kv_bits, concurrency=point.concurrency,
               budget_devices=point.budget_devices, status="error", pareto=False, error=message)
    return row


def run_sweep(model: LayerGraph, fleet: Fleet, grid: Grid, settings: SweepSettings | None = None, *,
              out: str | os.PathLike | None = None, jobs: int | None = None, backend: str = "process",
              address: str | None = None, progress: Callable[[dict, int, int], None] | None = None,
              on_start: Callable[[int, int], None] | None = None) -> SweepReport:
    """Solve every point of ``grid`` not already in ``out`` and return the grid's rows.

    ``jobs``: processes (default: the machine's cores; 1 solves in this process). ``backend``
    ``"ray"`` submits one Ray task per point (``address`` of a cluster, default a local one).
    Rows already in ``out`` with the same setup and grid values are reused; with the settings'
    ``retry_failed`` rows whose status is ``error`` or ``unknown`` are solved again (the newer row
    wins). ``on_start(todo, reused)`` is called once before solving, ``progress(row, done, todo)``
    after each point.
    """
    t0 = time.perf_counter()
    settings = settings or SweepSettings()
    base = settings.base_workload or workload_for(model)
    settings = replace(settings, base_workload=base)
    if settings.objective not in (None, "lex"):
        _check_objective_supported()
    if settings.method is not None and grid.budgets and settings.method not in EXACT_METHODS:
        raise InvalidSpec(ARGUMENT, "method", f"--budget needs an exact method ({', '.join(EXACT_METHODS)})")
    setup = setup_id(model, fleet, settings, base)
    points = grid.points(base)
    path = Path(out) if out is not None else None
    existing = read_rows(path) if path is not None else []
    other = {r["setup"] for r in existing} - {setup}
    if other:
        raise InvalidSpec(str(path), "setup", f"holds a sweep of another model, fleet or fixed workload "
                                              f"(setup {sorted(other)[0]}, this one {setup}); choose another -o")
    latest = {row_key(r): r for r in existing}
    retry = _RETRY if settings.retry_failed else set()
    todo = [p for p in points if (k := point_key(setup, settings.method_for(p.mode), p)) not in latest
            or latest[k]["status"] in retry]
    reused = len(points) - len(todo)
    if on_start:
        on_start(len(todo), reused)
    check_backend(backend)
    n_jobs = max(1, min(jobs or os.cpu_count() or 1, max(1, len(todo))))
    if backend == "process" and n_jobs > 1 and settings.solver_threads is None:
        # parallel points: one CP-SAT search worker each, so the machine is not oversubscribed
        settings = replace(settings, solver_threads=1)
    appender = _Appender(path) if path is not None else None
    new_rows: list[dict] = []

    def finished(row: dict) -> None:
        if appender is not None:
            appender.append(row)
        new_rows.append(row)
        latest[row_key(row)] = row
        if progress:
            progress(row, len(new_rows), len(todo))

    if backend == "ray":        # one CP-SAT search worker per task unless asked otherwise
        settings = replace(settings, solver_threads=settings.solver_threads or 1)

    def failed(p: Point, message: str) -> None:     # a worker or task died (memory, signal): record, go on
        finished(_error_row(model, fleet, settings, p, setup, message))

    try:
        if todo:
            run_tasks(_sweep_point, (model, fleet, settings, setup), todo, lambda p, row: finished(row),
                      backend=backend, jobs=n_jobs, address=address, failed=failed)
    finally:
        if appender is not None:
            appender.close()
    order = {point_key(setup, settings.method_for(p.mode), p): i for i, p in enumerate(points)}
    all_rows = sorted(latest.values(), key=lambda r: (order.get(row_key(r), len(order)), _sort_key(r)))
    all_rows = mark_pareto(all_rows)
    if path is not None:
        write_rows(path, all_rows)
    grid_rows = [r for r in all_rows if row_key(r) in order]
    return SweepReport(grid_rows, len(new_rows), reused, time.perf_counter() - t0, backend,
                       1 if backend == "ray" else n_jobs)


def _check_objective_supported() -> None:
    from placer.algorithms.registry import CpsatOptions

    if "objective" not in CpsatOptions.__dataclass_fields__:
        raise InvalidSpec(ARGUMENT, "objective", "this placer's place() does not take a CP-SAT objective")


def _sort_key(r: dict) -> tuple:
    return tuple("" if r.get(c) is None else str(r.get(c)) for c in ("method", "mode", "tp", "weight_bits",
                                                                     "kv_bits", "context_tokens", "concurrency"))


def _sweep_point(model, fleet, settings, setup, point: Point) -> dict:
    return solve_point(model, fleet, settings, point, setup)


