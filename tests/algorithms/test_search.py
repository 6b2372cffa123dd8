"""placer.algorithms.search.largest_true: exact on monotone predicates, honest when undecided."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from placer.algorithms.search import largest_true


@given(st.integers(0, 5000), st.integers(0, 20))
def test_finds_the_threshold_in_few_calls(threshold, lo):
    calls = []

    def decide(x):
        calls.append(x)
        return x <= threshold

    value, proven = largest_true(decide, lo)
    assert value == (threshold if threshold >= lo else None) and proven
    assert len(calls) <= 2 * (max(threshold - lo, 1)).bit_length() + 3


@given(st.integers(0, 300), st.integers(0, 300))
def test_respects_the_upper_end(threshold, hi):
    value, proven = largest_true(lambda x: x <= threshold, 0, hi)
    assert value == min(threshold, hi) and proven


def test_undecided_counts_as_false_and_unproves():
    assert largest_true(lambda x: True if x <= 10 else (None if x < 20 else False), 0, 100) == (10, False)
    assert largest_true(lambda x: None, 0, 100) == (None, False)
    assert largest_true(lambda x: False, 3, 2) == (None, True)
