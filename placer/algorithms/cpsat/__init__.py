"""The ``cpsat`` method: exact placement with OR-Tools CP-SAT, in every mode, with proofs.

* :mod:`.driver`: :func:`cpsat`, which picks a strategy;
* :mod:`.run`: the context strategies share and the result they build;
* strategies: :mod:`.identical_chain`, :mod:`.contiguous`, :mod:`.free`;
* models: :mod:`.models` (F0 path, F2 contiguous, F1 free), :mod:`.arcflow` (device count);
* :mod:`.fleet`: fleet views (twins, latency hierarchy, integer latencies);
* :mod:`.core`: unsatisfiable cores (shared with :mod:`placer.planning.studies.explain`).
"""

from placer.algorithms.cpsat.driver import cpsat
from placer.algorithms.objectives import OBJECTIVES

__all__ = ["cpsat", "OBJECTIVES"]
