"""The one table of placement methods: name, function, modes, exactness, options.

The CLI's ``--method`` choices, :func:`placer.algorithms.place`, ``plan`` and ``sweep`` all read
this table; a new method is one row here. Functions are named as ``module:function`` and imported
on first use (the CP-SAT method loads OR-Tools, which takes about a second).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, fields
from typing import Any

from placer.specs.errors import ARGUMENT, InvalidSpec

__all__ = ["Method", "CpsatOptions", "REGISTRY", "METHODS", "PLACING_METHODS", "EXACT_METHODS", "MODES_OF",
           "method", "default_mode", "OBJECTIVES",
           "LEVELS", "DEFAULT_OBJECTIVE", "parse_objective"]

from placer.algorithms.objectives import (  # noqa: F401
    DEFAULT_OBJECTIVE,
    LEVELS,
    OBJECTIVE_ALIASES,
    OBJECTIVES,
    parse_objective,
)


@dataclass(frozen=True)
class CpsatOptions:
    """Keyword options of the exact solver (``place(..., method="cpsat", **options)``).

    ``time_limit``: seconds for the whole call; ``seed``, ``threads``: CP-SAT's; ``progress``: a
    callable given ``dict(best, bound, elapsed, phase)``; ``hint``: a Result or an assignment to
    start from; ``objective``: one of :data:`OBJECTIVES`; ``deadline``: a
    :class:`~placer.algorithms.deadline.Deadline` shared with the caller's other phases (the call
    ends by the earlier of it and ``time_limit``); ``work_limit``: CP-SAT's deterministic time per
    search (machine-independent work units; None: no such limit).
    """

    time_limit: float = 30.0
    seed: int = 0
    threads: int = 2
    progress: Any = None
    hint: Any = None
    objective: str = "lex"
    deadline: Any = None
    work_limit: float | None = None

    def __post_init__(self):
        if self.time_limit is None or not self.time_limit > 0:
            raise ValueError("time_limit must be a positive number of seconds")
        if int(self.threads) < 1:
            raise ValueError("threads must be at least 1")
        parse_objective(self.objective)
        if self.work_limit is not None and not self.work_limit > 0:
            raise ValueError("work_limit must be a positive number of CP-SAT work units")

    def as_kwargs(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class Method:
    """A placement method.

    ``exact``: when it claims a proof (status optimal, a proven level, infeasible) the claim holds
    for the exact problem, and it is fit to decide feasibility in a search (an ``unknown`` answer,
    e.g. ``dp`` on a sparse fleet of mixed devices, leaves that search unproven, never wrong);
    ``options``: the dataclass of the keyword options it takes (None: none).
    """

    name: str
    target: str
    modes: tuple[str, ...]
    exact: bool
    options: type | None = None
    summary: str = ""

    @property
    def function(self):
        module, _, attr = self.target.partition(":")
        return getattr(importlib.import_module(module), attr)

    def parse_options(self, given: dict):
        """The options object for ``given``. Solver options given to a method without options are
        ignored (one call can try every method); any other name is a TypeError."""
        if self.options is None:
            unknown = set(given) - {f.name for f in fields(CpsatOptions)}
            if unknown:
                raise TypeError(f"unknown option(s) for place(): {', '.join(sorted(unknown))}")
            return None
        unknown = set(given) - {f.name for f in fields(self.options)}
        if unknown:
            raise TypeError(f"unknown option(s) for place(): {', '.join(sorted(unknown))}")
        return self.options(**given)


REGISTRY: dict[str, Method] = {m.name: m for m in (
    Method("cpsat", "placer.algorithms.cpsat:cpsat", ("contiguous", "free", "split"), True, CpsatOptions,
           "exact: every level proven or bounded (OR-Tools CP-SAT)"),
    Method("dp", "placer.algorithms.dp:dp", ("contiguous", "split"), True, None,
           "exact fewest contiguous stages of a chain, smallest bottleneck; on mixed device types "
           "proven where the order-free optimum lies on a fleet path, else a fixed order or unknown"),
    Method("greedy", "placer.algorithms.greedy:greedy", ("contiguous", "split"), False, None,
           "next-fit along a greedily walked device path"),
    Method("pathwalk", "placer.algorithms.pathwalk:pathwalk", ("contiguous", "split"), False, None,
           "next-fit along simple fleet paths found by depth-first search, each path cut exactly"),
    Method("typepack", "placer.algorithms.typepack:typepack", ("free",), False, None,
           "the published rule: dense attention alone, other layers next-fit by kind"),
    Method("ffd", "placer.algorithms.ffd:ffd", ("free",), False, None, "first-fit decreasing"),
    Method("bound", "placer.algorithms.bound:lower_bound", ("contiguous", "free", "split"), True, None,
           "lower bounds on the device count only"),
)}

METHODS = tuple(REGISTRY)
PLACING_METHODS = tuple(name for name in METHODS if name != "bound")
EXACT_METHODS = tuple(name for name in PLACING_METHODS if REGISTRY[name].exact)
MODES_OF = {name: m.modes for name, m in REGISTRY.items()}


def method(name: str) -> Method:
    """The registry row of ``name``; :class:`InvalidSpec` (field ``method``) when there is none."""
    if name not in REGISTRY:
        raise InvalidSpec(ARGUMENT, "method", f"unknown method {name!r} (one of {', '.join(METHODS)})")
    return REGISTRY[name]


def default_mode(name: str) -> str:
    """The mode ``name`` places in when none is asked for."""
    return REGISTRY[name].modes[0] if name in REGISTRY else "contiguous"
