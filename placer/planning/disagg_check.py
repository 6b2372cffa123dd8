"""The event run that checks a disaggregated plan's prefill pool, and the replicas it adds when the
closed form was optimistic.

The closed form (:func:`placer.planning.disagg.prefill_replicas_for`) queues prompts one after
another (M/D/1). The simulator's continuous batching puts prompts that wait together into one
step's token budget, so each finishes later than alone: at the same load the event run's median
TTFT can exceed the closed form's mean. The plan states a median TTFT that the event run gives
(what ``placer simulate`` reports for the written mapping), so after choosing it simulates one
prefill replica at its share of the rate and, while the median TTFT plus the KV transfer misses
the target, adds a prefill replica (as long as the replicas fit the fleet). Candidates are confirmed best
first (:func:`choose_confirmed`), so the plan has the fewest devices among candidates the event run
confirms.
"""

from __future__ import annotations

import math

from placer.specs.errors import InvalidSpec

__all__ = ["prefill_check", "confirm_prefill", "choose_confirmed"]

MAX_ADDED = 64      # replicas the check may add before it reports the miss instead


def prefill_check(c, budget: int):
    """One prefill replica of candidate ``c`` simulated at its share of the rate (Poisson arrivals,
    one token each: the first token is the prefill's), for the TTFT the closed form is checked
    against; None when the run cannot be set up."""
    from placer.simulate import Serving, Traffic, simulate

    p = c.prefill.solved
    share = c.rate / c.x
    duration = max(200 / share, 50 * c.prefill.prefill_us / 1e6)
    try:
        return simulate(p.instance, p.per_group.assignment,
                        Traffic(output_tokens=1, arrival_rate=share, duration_s=duration),
                        Serving(max_num_batched_tokens=budget))
    except InvalidSpec:
        return None


def queue_wait_us(rate: float, interval_us: float, replicas: int) -> float:
    """M/D/1 mean wait of one prefill replica at ``rate / replicas`` arrivals per second."""
    rho = rate / replicas * interval_us / 1e6
    return math.inf if rho >= 1 else rho * interval_us / (2 * (1 - rho))


def _meets(sim, transfer_us: float, ttft_us: float) -> bool:
    return sim is None or sim.ttft_p50_us is None or sim.ttft_p50_us + transfer_us <= ttft_us * (1 + 1e-9)


def confirm_prefill(c, budget: int, ttft_us: float, fits) -> object:
    """The event run of ``c``'s prefill replica, after raising ``c.x`` (and its queue wait) until the
    run's median TTFT plus the transfer meets ``ttft_us`` or ``fits(x)`` says the replicas no longer
    fit; a candidate that misses at every ``x`` gets its closed-form ``x`` back and ``event_miss``."""
    first = c.x
    sim = prefill_check(c, budget)
    while not _meets(sim, c.transfer_us, ttft_us) and c.x - first < MAX_ADDED and fits(c.x + 1):
        c.x += 1
        c.queue_us = queue_wait_us(c.rate, c.prefill.interval_us, c.x)
        sim = prefill_check(c, budget)
    if not _meets(sim, c.transfer_us, ttft_us):
        c.x, c.queue_us, c.event_miss = first, queue_wait_us(c.rate, c.prefill.interval_us, first), True
        return sim
    if c.x != first:
        c.closed_x = first
    return sim


def choose_confirmed(cands: list, key, budget: int, ttft_us: float, fits) -> tuple[object, object, str]:
    """``(chosen, its prefill run, note)``: the candidate with the least ``key`` once the event run has
    confirmed it (:func:`confirm_prefill`). Candidates are confirmed best first; raising ``x`` only
    raises a candidate's key (its devices and power grow), so a closed-form key is a lower bound on
    the confirmed one and the search stops at the first unconfirmed candidate whose closed-form
    key is not below the best confirmed. When none is confirmed, the closed form's best is chosen
    and the note says its run misses."""
    best = best_sim = None
    for c in sorted(cands, key=key):
        if best is not None and not key(c) < key(best):
            break
        sim = confirm_prefill(c, budget, ttft_us, lambda x, c=c: fits(c, x))
        if not c.event_miss and (best is None or key(c) < key(best)):
            best, best_sim = c, sim
    if best is None:
        best = min(cands, key=key)
        best_sim = prefill_check(best, budget)
        ttft = None if best_sim is None or best_sim.ttft_p50_us is None else best_sim.ttft_p50_us + best.transfer_us
        words = "" if ttft is None else f" {ttft / 1e3:,.1f} ms"
        return best, best_sim, (f"; the event run's median TTFT{words} misses the target with {best.x} prefill "
                                f"replicas, and more do not fit the fleet")
    note = "" if best.closed_x is None else (
        f"; the event run's median TTFT missed the target at {best.closed_x} prefill replicas (prompts that wait "
        f"together share a step), so the plan takes {best.x}")
    return best, best_sim, note
