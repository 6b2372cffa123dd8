"""The one place that talks to OR-Tools CP-SAT: parameters, status mapping, workarounds, interrupts.

Everything solver-version-specific lives here, each workaround with the issue that motivates it:

* google/or-tools#5293 (9.15): presolve's ``RemoveEnforcementThatMakesConstraintTrivial``
  accumulates Boolean coefficients in a 32-bit ``int``; when a row's coefficients sum above 2^31
  the sum wraps, ``enf => row`` silently becomes ``row`` and CP-SAT can report a wrong OPTIMAL.
  Placer keeps every row's coefficient sum below 2^31 (:mod:`placer.algorithms.quantize`) *and*
  sets ``presolve_inclusion_work_limit = 0``, the workaround given in the issue (fixed upstream by
  PR #5294).
* google/or-tools#4352 / #73: models that could overflow int64 are refused as MODEL_INVALID; the
  row check in :mod:`quantize` raises :class:`~placer.specs.errors.SolverLimitError` before building.
* Gap limits: with the default ``absolute_gap_limit`` (1e-4) a search can end as OPTIMAL with
  objective != bound (``sat_parameters.proto``: "one can check the best objective bound to see the
  actual gap"). Placer sets both gap limits to 0 and still decides "proven" from objective == bound.
* Ctrl-C: ``catch_sigint_signal`` is switched off and the search runs in a worker thread, so the
  main thread receives :class:`KeyboardInterrupt`, calls ``stop_search``, keeps the best solution
  found so far and records the interrupt (:func:`placer.algorithms.deadline.note_interrupt`) so
  that no later phase starts. The main thread waits on an Event, not in ``Thread.join``: a
  KeyboardInterrupt inside ``join`` can leave the thread reported dead while the C++ search still
  runs (python/cpython#90882), and exiting then aborts the process (``std::terminate``).
* MODEL_INVALID is raised as :class:`ModelInvalid` (a bug), never reported as "no placement".
* Assumptions: ``keep_all_feasible_solutions_in_presolve`` is set when assumptions are used, as
  CPMpy does (google/or-tools#2649).
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field

import ortools
from ortools.sat.python import cp_model

from placer.algorithms.deadline import note_interrupt

__all__ = ["ORTOOLS_VERSION", "ModelInvalid", "SolveOutcome", "parameters", "solve", "status_name"]

ORTOOLS_VERSION = ortools.__version__

_STATUS = {
    cp_model.OPTIMAL: "OPTIMAL",
    cp_model.FEASIBLE: "FEASIBLE",
    cp_model.INFEASIBLE: "INFEASIBLE",
    cp_model.MODEL_INVALID: "MODEL_INVALID",
    cp_model.UNKNOWN: "UNKNOWN",
}

_FINGERPRINT = re.compile(r"solution_fingerprint:\s*(0x[0-9a-fA-F]+)")


class ModelInvalid(RuntimeError):
    """CP-SAT refused a model placer built (MODEL_INVALID): a bug in placer, never an answer about
    the placement; the message is CP-SAT's own validation text."""


def status_name(code) -> str:
    return _STATUS.get(code, str(code))


def parameters(*, time_limit: float, seed: int, threads: int, assumptions: bool = False,
               fix_to_hint: bool = False, light_presolve: bool = False, work_limit: float | None = None) -> dict:
    """CP-SAT parameters placer uses, as a plain dict (recorded in ``Result.stats``).

    ``work_limit``: CP-SAT's deterministic time (``max_deterministic_time``, its own work units,
    independent of the machine's speed and load); with one worker and a fixed seed a search it
    stops ends the same way on every run."""
    if time_limit is None or not time_limit > 0:
        raise ValueError("time_limit must be a positive number of seconds")
    if threads < 1:
        raise ValueError("threads must be at least 1")
    if work_limit is not None and not work_limit > 0:
        raise ValueError("work_limit must be a positive number of CP-SAT work units")
    p = dict(
        max_time_in_seconds=float(time_limit),
        random_seed=int(seed),
        num_workers=int(threads),
        # google/or-tools#5293: 32-bit accumulation in presolve can drop an enforcement literal.
        presolve_inclusion_work_limit=0,
        # never let a gap limit end the search; proofs are objective == bound
        absolute_gap_limit=0.0,
        relative_gap_limit=0.0,
        # the main thread handles Ctrl-C (see module docstring)
        catch_sigint_signal=False,
        log_search_progress=True,
        log_to_stdout=False,
    )
    if work_limit is not None:
        p["max_deterministic_time"] = float(work_limit)
    if assumptions:
        p["keep_all_feasible_solutions_in_presolve"] = True   # google/or-tools#2649
    if fix_to_hint:
        p["fix_variables_to_their_hinted_value"] = True
    if light_presolve:
        # circuit models over dense fleets: probing thousands of arc literals and recomputing the
        # symmetry group in every presolve round cost seconds and find little; placer breaks the
        # symmetry among twin devices itself, and the LP with the circuit cuts does the rest
        p["cp_model_probing_level"] = 0
        p["symmetry_level"] = 0
    return p


@dataclass
class SolveOutcome:
    """What one CP-SAT call produced, in placer's terms."""

    status: str                         # OPTIMAL | FEASIBLE | INFEASIBLE | MODEL_INVALID | UNKNOWN
    values: dict | None                 # name -> list of values of the watched variables, or None
    objective: float | None
    bound: float | None
    wall_seconds: float
    deterministic_time: float = 0.0
    interrupted: bool = False
    stopped_at_target: bool = False
    fingerprint: str | None = None
    core: list[int] = field(default_factory=list)   # indices of sufficient assumptions when INFEASIBLE
    solutions: int = 0

    @property
    def has_solution(self) -> bool:
        return self.values is not None

    @property
    def proven(self) -> bool:
        """Objective proven optimal: OPTIMAL and objective == bound (or a feasibility model solved)."""
        if self.status != "OPTIMAL" or self.values is None:
            return False
        if self.objective is None:
            return True
        return self.bound is not None and round(self.objective) == round(self.bound)

    def record(self) -> dict:
        return dict(status=self.status, objective=self.objective, bound=self.bound,
                    wall_seconds=round(self.wall_seconds, 4),
                    deterministic_time=round(self.deterministic_time, 4),
                    interrupted=self.interrupted, stopped_at_target=self.stopped_at_target,
                    solutions=self.solutions, solution_fingerprint=self.fingerprint)


class _Watcher(cp_model.CpSolverSolutionCallback):
    """Keeps the latest solution of the watched variables; reports progress; stops at a target."""

    def __init__(self, watch: dict, progress, target, t0: float, offset: float, scale: float):
        super().__init__()
        self.watch = watch
        self.progress = progress
        self.target = target
        self.t0 = t0
        self.offset = offset
        self.scale = scale
        self.values = None
        self.objective = None
        self.count = 0
        self.interrupted = False
        self.hit_target = False

    def on_solution_callback(self):
        self.count += 1
        self.values = {k: [self.value(v) for v in vs] for k, vs in self.watch.items()}
        self.objective = self.objective_value
        try:
            if self.progress is not None:
                self.progress(dict(best=self.offset + self.objective / self.scale,
                                   bound=self.offset + self.best_objective_bound / self.scale,
                                   elapsed=time.monotonic() - self.t0))
        except KeyboardInterrupt:
            self.interrupted = True
            self.stop_search()
            return
        if self.target is not None and self.objective <= self.target + 1e-9:
            self.hit_target = True
            self.stop_search()


def solve(model: cp_model.CpModel, watch: dict, *, params: dict, progress=None, target: float | None = None,
          assumptions=(), report_offset: float = 0.0, report_scale: float = 1.0, t0: float | None = None,
          ) -> SolveOutcome:
    """Solve ``model`` and return the values of ``watch`` (name -> list of variables).

    ``target``: stop as soon as a solution reaches this objective value (a known lower bound), by
    callback rather than by constraint. ``progress`` gets ``dict(best, bound, elapsed)`` in the
    caller's units (``offset + objective / scale``). Ctrl-C in the main thread stops the search and
    the best solution found so far is returned with ``interrupted=True``.
    """
    solver = cp_model.CpSolver()
    for k, v in params.items():
        setattr(solver.parameters, k, v)
    if assumptions:
        model.clear_assumptions()
        model.add_assumptions(list(assumptions))
    fingerprint: list[str] = []

    def on_log(line: str):
        m = _FINGERPRINT.search(line)
        if m:
            fingerprint.append(m.group(1))

    solver.log_callback = on_log
    t0 = time.monotonic() if t0 is None else t0
    watcher = _Watcher(watch, progress, target, t0, report_offset, report_scale)
    box: dict = {}
    done = threading.Event()

    def work():
        try:
            box["status"] = solver.solve(model, watcher)
        except BaseException as exc:   # surfaced in the calling thread
            box["error"] = exc
        finally:
            done.set()

    start = time.monotonic()
    thread = threading.Thread(target=work, name="placer-cpsat", daemon=True)
    interrupted = False
    thread.start()
    # an Event, not Thread.join (see the module docstring); every Ctrl-C stops the search
    while not done.is_set():
        try:
            done.wait(0.05)
        except KeyboardInterrupt:
            interrupted = True
            note_interrupt()
            solver.stop_search()
    thread.join()
    wall = time.monotonic() - start
    if "error" in box:
        raise box["error"]
    status = status_name(box["status"])
    if status == "MODEL_INVALID":
        raise ModelInvalid(f"CP-SAT refused the model placer built (a bug in placer): {model.validate()}")
    interrupted = interrupted or watcher.interrupted
    has_objective = model.has_objective()
    values = objective = bound = None
    if status in ("OPTIMAL", "FEASIBLE"):
        values = {k: [solver.value(v) for v in vs] for k, vs in watch.items()}
        objective = solver.objective_value if has_objective else None
    elif watcher.values is not None:
        values, objective = watcher.values, watcher.objective
    if has_objective:
        bound = solver.best_objective_bound
    core = []
    if status == "INFEASIBLE" and assumptions:
        core = list(solver.sufficient_assumptions_for_infeasibility())
    return SolveOutcome(status=status, values=values, objective=objective, bound=bound,
                        wall_seconds=wall, deterministic_time=solver.deterministic_time,
                        interrupted=interrupted, stopped_at_target=watcher.hit_target,
                        fingerprint=fingerprint[-1] if fingerprint else None, core=core,
                        solutions=watcher.count)
