"""placer.algorithms.packing: first-fit decreasing, the minimum-slack greedy, the arc-flow graph."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import packs_brute

from placer.algorithms.packing import (
    build_arcflow,
    decompose,
    ffd_bins,
    ffd_classes,
    first_fit_decreasing,
    max_fill_bins,
    packs,
    prune_for_waste,
)


def test_first_fit_decreasing_by_hand():
    # sizes 7, 5, 4, 3, 1 into rooms of 10: 7+3, 5+4+1
    assert first_fit_decreasing([5, 7, 1, 4, 3], [10, 10, 10]) == [1, 0, 1, 1, 0]
    assert first_fit_decreasing([11], [10]) is None


def test_ffd_over_classes_opens_large_devices_first():
    packed = ffd_classes([6, 6, 3], [(9, 2), (12, 1)])
    # the 12-byte device (class 1) opens first and takes 6 + 6, the 3 goes to a 9
    assert packed == [(1, [0, 1]), (0, [2])]
    assert ffd_bins([6, 6, 3], [(9, 2), (12, 1)]) == [(1, [6, 6]), (0, [3])]
    assert ffd_classes([10], [(9, 3)]) is None


def _optimum(sizes, cap):
    n = len(sizes)
    for k in range(1, n + 1):
        for labels in itertools.product(range(k), repeat=n):
            loads = [0] * k
            for s, b in zip(sizes, labels):
                loads[b] += s
            if max(loads) <= cap:
                return k
    return None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 10), min_size=1, max_size=6), st.integers(10, 16))
def test_greedy_packings_are_valid_and_not_below_the_optimum(sizes, cap):
    opt = _optimum(sizes, cap)
    for bins in (ffd_bins(sizes, [(cap, len(sizes))]), max_fill_bins(sizes, [(cap, len(sizes))])):
        assert bins is not None
        assert sorted(s for _, items in bins for s in items) == sorted(sizes)
        assert all(sum(items) <= cap for _, items in bins)
        assert len(bins) >= opt


def test_arcflow_graph_and_decomposition():
    sizes, cap = [6, 4, 4, 3, 3], 10
    af = build_arcflow(sizes, [(cap, 5)])
    assert af.sizes == [6, 4, 3] and af.counts == [1, 2, 2]
    assert 0 in af.levels[0] and max(af.levels[0]) <= cap
    # two devices: 6+4 and 4+3+3, no waste at all; prune keeps the arcs of that packing
    pruned = prune_for_waste(af, 2)
    assert pruned is not None and pruned.n_arcs <= af.n_arcs
    assert prune_for_waste(af, 1) is None           # one device cannot hold 20 bytes
    flow = [0] * len(af.arcs[0])
    index = {a: k for k, a in enumerate(af.arcs[0])}
    for path in ([(0, 6, 0), (6, 10, 1), (10, -1, -1)], [(0, 4, 1), (4, 7, 2), (7, 10, 2), (10, -1, -1)]):
        for arc in path:
            flow[index[arc]] += 1
    bins = decompose(af, {0: flow})
    assert sorted(sorted(items) for _, items in bins) == [[3, 3, 4], [4, 6]]


def test_packs_by_hand():
    # 5 + 3 + 2 and 4 + 3 + 3 fill two rooms of 10 exactly; first-fit decreasing puts 5 + 4
    # together, then 3 + 3 + 3, and finds no room for the 2
    assert packs([5, 4, 3, 3, 3, 2], [10, 10]) is True
    assert first_fit_decreasing([5, 4, 3, 3, 3, 2], [10, 10]) is None
    assert packs([6, 5, 5, 5], [10, 10]) is False      # 21 bytes in 20
    assert packs([6, 6, 6], [9, 9]) is False           # 18 bytes in 18, but no two share a room
    assert packs([7, 7], [10, 10, 5]) is True
    assert packs([11], [10, 10]) is False
    assert packs([], []) is True
    # an undecided search says None (a bound then treats it as fitting), never a wrong answer
    assert packs([5, 4, 3, 3, 3, 2], [10, 10], budget=0) is None


@settings(max_examples=120, deadline=None)
@given(st.lists(st.integers(1, 12), min_size=1, max_size=6), st.lists(st.integers(4, 16), min_size=1, max_size=3))
def test_packs_against_brute_force(sizes, rooms):
    assert packs(sizes, rooms) is packs_brute(sizes, rooms)
