"""Placement methods: pure functions ``Instance -> Result``, behind one entry point.

An index of the package (each concept has one home):

* :mod:`.entry`: :func:`place` (every guard, the exact re-check), :func:`infeasibility`,
  :func:`max_feasible_concurrency`;
* :mod:`.registry`: the table of methods (name, function, modes, exactness, options);
* :mod:`.chain`, :mod:`.packing`: pure combinatorics on integer lists; :mod:`.search`: the
  largest value a monotone predicate accepts;
* methods: :mod:`.cpsat` (exact, with proofs), :mod:`.dp` (exact contiguous chains),
  :mod:`.greedy`, :mod:`.typepack`, :mod:`.ffd`, :mod:`.bound` (lower bounds only);
* :mod:`.check` (the exact-bytes check), :mod:`.pins`, :mod:`.paths`, :mod:`.quantize`,
  :mod:`.ortools_adapter` (the only module, with the CP-SAT model builders, that imports OR-Tools).
"""

from placer.algorithms.check import PlacementBug
from placer.algorithms.entry import (
           decide_feasible,
           infeasibility,
           largest_feasible_concurrency,
           max_feasible_concurrency,
           place,
)
from placer.algorithms.registry import (
           EXACT_METHODS,
           METHODS,
           MODES_OF,
           PLACING_METHODS,
           REGISTRY,
           default_mode,
)

__all__ = ["place", "METHODS", "PLACING_METHODS", "EXACT_METHODS", "REGISTRY", "MODES_OF", "default_mode",
           "max_feasible_concurrency", "largest_feasible_concurrency", "decide_feasible", "infeasibility",
           "PlacementBug"]
