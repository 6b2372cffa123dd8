"""Performance of a placement at full size, from a calibrated cost model and a discrete-event run.

:mod:`.cost` turns a placement into segments with step times (constants from the hardware spec's
``perf`` block), :mod:`.prefill` prices prompt chunks on them, :mod:`.des` simulates serving with
simpy (:class:`Simulation`; chunked prefill and decode, a closed loop at fixed concurrency),
:mod:`.result` holds what it reports (:func:`placer.plotting.plot_gantt` draws its stage occupancy)
(:mod:`placer.planning.studies.modes` compares the placements of every mode side by side.)
"""

from placer.simulate.arguments import RunSettings, Serving, Traffic, split_options
from placer.simulate.contexts import ContextDist, parse_context_dist
from placer.simulate.cost import Segment, segments_of
from placer.simulate.des import Simulation, simulate, simulate_mapping
from placer.simulate.result import SimResult

__all__ = ["Segment", "segments_of", "ContextDist", "SimResult", "Simulation", "parse_context_dist", "simulate",
           "simulate_mapping", "Traffic", "Serving", "RunSettings", "split_options"]
