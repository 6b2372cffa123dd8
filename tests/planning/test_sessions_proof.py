"""The sessions-held level with a tier is exact: its closed form (placer.planning.sessions_held,
best_split) against a brute-force enumeration of every periodic schedule of small instances.

The schedule model, in whole time units: a period of P, K on-chip slots; R sessions resident (a
slot each, always); M parked sessions, each with a phase in 0..P-1: its turn takes a slot for
[phase, phase + T), reloads over its link in [phase, phase + r) and writes its new KV in
[phase + T - w, phase + T) the other way, all modulo P. A schedule is valid when at every instant
at most K slots are taken, no two reloads overlap, no two writes overlap, and M is within the
tier's capacity. The brute force tries every R and every set of phases (two parked sessions
sharing a phase would overlap their reloads)."""

from __future__ import annotations

import itertools
import math

import pytest

from placer.planning.sessions_held import best_split


def _valid(phases, p, t, k, resident, r, w) -> bool:
    slots, reads, writes = [resident] * p, [0] * p, [0] * p
    for ph in phases:
        for x in range(t):
            slots[(ph + x) % p] += 1
        for x in range(r):
            reads[(ph + x) % p] += 1
        for x in range(w):
            writes[(ph + t - w + x) % p] += 1
    return max(slots) <= k and max(reads) <= 1 and max(writes) <= 1


def _brute(p, t, k, r, w, cap) -> int:
    best = 0
    for resident in range(k + 1):
        for m in range(min(p, cap), -1, -1):
            if m + resident <= best:
                break
            if any(_valid(ph, p, t, k, resident, r, w) for ph in itertools.combinations(range(p), m)):
                best = m + resident
                break
    return best


CASES = [(p, t, k, r, w, cap)
         for p in (4, 5, 6, 7)
         for t in range(2, p + 1)
         for k in (1, 2, 3)
         for r in (1, 2)
         for w in (1, 2)
         for cap in (1, 3, 100)
         if w <= t]


@pytest.mark.parametrize("p, t, k, r, w, cap", CASES)
def test_closed_form_meets_the_brute_force(p, t, k, r, w, cap):
    link = min(p // r, p // w)
    resident, parked = best_split(k, p, t, link, cap)
    assert resident + parked == _brute(p, t, k, r, w, cap)
    # and the split it names is a schedule: evenly spread phases hold it
    phases = [math.floor(i * p / parked) for i in range(parked)] if parked else []
    assert parked <= cap and _valid(phases, p, t, k, resident, r, w)


def test_a_mixed_split_beats_both_pure_ones():
    # 10 slots, turns a tenth of the period, the links carry 5 reloads a period: 9 resident and 5 parked
    assert best_split(10, 100, 10, 5, 1000) == (9, 5)
