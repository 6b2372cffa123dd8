"""Old import paths kept for one release: each is the new module itself, with a warning.

A module that moved leaves a two-line file at its old path calling :func:`moved`; the old name is
then an alias of the new module in ``sys.modules`` (so ``import``, ``from ... import`` and
monkeypatching reach the same object), and importing it warns with :class:`DeprecationWarning`.
"""

from __future__ import annotations

import importlib
import sys
import warnings

__all__ = ["moved", "MOVED"]

# old import path -> new one (the shims at the old paths, and the test that they warn, read this)
MOVED = dict(line.split() for line in """
placer.compare                    placer.planning.compare
placer.speed                      placer.planning.speed
placer.frontier                   placer.planning.frontier
placer.sweep                      placer.planning.sweep
placer.plan                       placer.planning.budget
placer.perstage                   placer.planning.stage_degrees
placer.explain                    placer.planning.explain
placer.algorithms.perstage        placer.algorithms.stage_degrees
placer.algorithms.cpsat.perstage  placer.algorithms.cpsat.stage_degrees
placer.cli.perstage_cmd           placer.cli.solve_stage_degrees
placer.rebuild                    placer.mapping.rebuild
placer.validate                   placer.mapping.validate
placer.validate_ranks             placer.mapping.ranks
placer.simulate.modes             placer.planning.modes
""".strip().splitlines())


def moved(old: str) -> None:
    """Make ``old`` an alias of its new module (:data:`MOVED`) and warn that the path is going."""
    new = MOVED[old]
    warnings.warn(f"{old} has moved to {new}; the old import path is kept for one release",
                  DeprecationWarning, stacklevel=3)
    sys.modules[old] = importlib.import_module(new)
