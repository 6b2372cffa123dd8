"""placer.algorithms.chain: next-fit, fixed-order ends and bottleneck cuts against brute force."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import packs_brute

from placer.algorithms.chain import (
    NO_PINS,
    ChainPins,
    bottleneck_ends,
    chain_min_devices,
    fewest_packed_runs,
    fixed_order_ends,
    next_fit,
    next_fit_ends,
    prefix_bounds,
    prefix_sums,
    segment_lower_bound,
)


def partitions(n: int):
    """Every partition of range(n) into consecutive non-empty runs, as end lists."""
    for k in range(n):
        for cuts in itertools.combinations(range(1, n), k):
            yield [*cuts, n]


def runs_of(ends):
    return list(zip([0, *ends], ends))


def test_next_fit_by_hand():
    assert next_fit([4, 3, 3, 5, 1], 7) == [(0, 2), (2, 3), (3, 5)]
    assert next_fit([8], 7) is None
    assert next_fit([], 7) == []
    assert next_fit_ends(prefix_sums([4, 3, 3, 5, 1]), 7) == [2, 3, 5]
    assert next_fit_ends(prefix_sums([4, 3, 3, 5, 1]), 7, max_stages=2) is None


def test_next_fit_with_pins_never_cuts_a_group():
    # nodes 1..2 pinned together: no stage may end at position 2
    floor_cut = (0, 1, 1, 3, 4)
    pins = ChainPins(("nodes 1-2",), floor_cut, (4, 4, 4, 4, 4), (4, 4, 4, 4, 4), {})
    assert next_fit_ends(prefix_sums([3, 3, 3, 3]), 6, pins=pins) == [1, 3, 4]
    assert NO_PINS.any is False


def test_next_fit_with_a_second_load():
    demand, load = [1, 1, 1, 1], [5, 0, 5, 0]
    ends = next_fit_ends(prefix_sums(demand), 10, load=(prefix_sums(load), 5))
    assert ends == [2, 4]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(1, 9), min_size=1, max_size=7), st.integers(5, 15))
def test_next_fit_is_the_fewest_stages(weights, cap):
    prefix = prefix_sums(weights)
    best = min((len(e) for e in partitions(len(weights))
                if all(prefix[b] - prefix[a] <= cap for a, b in runs_of(e))), default=None)
    ends = next_fit_ends(prefix, cap)
    assert (None if ends is None else len(ends)) == best
    if best is not None:
        assert segment_lower_bound(weights, cap) == best
        pre, suf = prefix_bounds(weights, cap)
        assert pre[-1] == suf[0] == best


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(1, 9), min_size=1, max_size=6), st.lists(st.integers(3, 15), min_size=1, max_size=6))
def test_fixed_order_ends_against_brute_force(weights, caps):
    prefix = prefix_sums(weights)
    best = None
    for e in partitions(len(weights)):
        if len(e) <= len(caps) and all(prefix[b] - prefix[a] <= caps[k] for k, (a, b) in enumerate(runs_of(e))):
            best = len(e) if best is None else min(best, len(e))
    ends = fixed_order_ends(prefix, caps)
    assert (None if ends is None else len(ends)) == best
    if ends is not None:
        assert all(prefix[b] - prefix[a] <= caps[k] for k, (a, b) in enumerate(runs_of(ends)))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(1, 9), min_size=1, max_size=7), st.lists(st.integers(0, 9), min_size=7, max_size=7),
       st.integers(9, 20))
def test_bottleneck_ends_against_brute_force(weights, loads, cap):
    n = len(weights)
    loads = loads[:n]
    prefix, lp = prefix_sums(weights), prefix_sums(loads)
    ok = [e for e in partitions(n) if all(prefix[b] - prefix[a] <= cap for a, b in runs_of(e))]
    assert ok          # every weight fits the capacity
    k = min(len(e) for e in ok)
    for load_prefix, p in ((None, prefix), (lp, lp)):
        best = min(max(p[b] - p[a] for a, b in runs_of(e)) for e in ok if len(e) == k)
        ends = bottleneck_ends(prefix, cap, k, load_prefix=load_prefix)
        assert len(ends) == k
        assert all(prefix[b] - prefix[a] <= cap for a, b in runs_of(ends))
        assert max(p[b] - p[a] for a, b in runs_of(ends)) == best


def test_bottleneck_ends_by_hand():
    # [4, 4, 1, 1] in 2 stages of capacity 8: (4 | 4 1 1) has bottleneck 6, (4 4 | 1 1) has 8
    assert bottleneck_ends(prefix_sums([4, 4, 1, 1]), 8, 2) == [1, 4]
    assert bottleneck_ends(prefix_sums([4, 4, 1, 1]), 8, 1) is None


def test_chain_min_devices_uses_the_big_device_where_it_helps():
    # classes: one device of 10, three of 5; [5, 5, 5, 5]: 10 takes two nodes, then two 5s
    count, segments = chain_min_devices([5, 5, 5, 5], [(10, 1), (5, 3)])
    assert count == 3 and sorted(t for _, _, t in segments) == [0, 1, 1]
    assert chain_min_devices([5, 5, 5, 5], [(5, 3)]) == (None, None)


def test_fewest_packed_runs_by_hand():
    # groups of two 10-byte devices: [4 4 4] (4+4, 4), [9 4 4] (9, 4+4), [4 9], [9]: each run
    # would overflow the group's 20 bytes with its next node
    demand = [4, 4, 4, 9, 4, 4, 4, 9, 9]
    assert fewest_packed_runs(demand, [[10, 10]]) == 4
    assert segment_lower_bound(demand, 20) == 4
    # 6 + 6 + 6 in two rooms of 9: the total (18) fits, the packing does not
    assert fewest_packed_runs([6, 6, 6], [[9, 9]]) == 2
    assert segment_lower_bound([6, 6, 6], 18) == 1
    # single-device groups: plain next-fit on the largest device
    assert fewest_packed_runs([5, 5, 5], [[10], [12]]) == 2


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(1, 10), min_size=1, max_size=6),
       st.lists(st.lists(st.integers(5, 14), min_size=1, max_size=3), min_size=1, max_size=2))
def test_fewest_packed_runs_against_brute_force(demand, groups):
    best = None
    for ends in partitions(len(demand)):
        if all(any(packs_brute(demand[a:b], g) for g in groups) for a, b in runs_of(ends)):
            best = len(ends) if best is None else min(best, len(ends))
    got = fewest_packed_runs(demand, groups)
    if best is None:          # some node fits no group: the count is still a lower bound
        assert got >= 1
    else:
        assert got == best
