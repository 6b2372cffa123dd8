"""Performance of a placement at full size, from a calibrated cost model and a discrete-event run.

:mod:`.cost` turns a placement into segments with step times (constants from the hardware spec's
``perf`` block), :mod:`.des` simulates decode with simpy, :mod:`.gantt` draws stage occupancy and
(:mod:`placer.planning.modes` compares the placements of every mode side by side.)
"""

from .cost import Segment, segments_of
from .des import ContextDist, SimResult, parse_context_dist, simulate, simulate_mapping

__all__ = ["Segment", "segments_of", "ContextDist", "SimResult", "parse_context_dist", "simulate",
           "simulate_mapping"]
