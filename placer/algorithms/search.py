"""One search for the largest value a monotone predicate accepts.

Every "largest feasible X" in placer (concurrency that fits, concurrency within a device budget,
context length, weight bits) is this search: exponential from the low end until a value fails,
then bisection between the last success and the first failure, O(log answer) calls.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["largest_true", "doubling_ladder"]


def largest_true(decide: Callable[[int], bool | None], lo: int, hi: int | None = None
                 ) -> tuple[int | None, bool]:
    """Largest ``x`` in ``[lo, hi]`` (``hi`` None: unbounded) with ``decide(x)`` true, for ``decide``
    monotone (true up to some value, false above).

    ``decide`` may answer None (undecided, e.g. a time limit): that counts as false and makes the
    answer only a lower bound. Returns ``(x, proven)``: x is None when ``decide(lo)`` is not true;
    ``proven`` is false when any answer that shaped the result was None.

    Examples
    --------
    >>> largest_true(lambda x: x <= 37, 0)
    (37, True)
    >>> largest_true(lambda x: x <= 5, 0, 3)
    (3, True)
    >>> largest_true(lambda x: None if x > 8 else True, 1)
    (8, False)
    """
    proven = True

    def ok(x: int) -> bool:
        nonlocal proven
        v = decide(x)
        if v is None:
            proven = False
        return bool(v)

    if hi is not None and lo > hi:
        return None, proven
    if not ok(lo):
        return None, proven
    good, step = lo, 1
    bad = None if hi is None else hi + 1
    while hi is None or good < hi:
        probe = good + step if hi is None else min(good + step, hi)
        if ok(probe):
            good = probe
            step *= 2
        else:
            bad = probe
            break
    if bad is None:
        return good, proven
    while bad - good > 1:
        mid = (good + bad) // 2
        if ok(mid):
            good = mid
        else:
            bad = mid
    return good, proven


def doubling_ladder(top: int) -> list[int]:
    """``1, 2, 4, ...`` below ``top``, then ``top`` itself: the loads a sweep up to a ceiling visits.

    >>> doubling_ladder(6)
    [1, 2, 4, 6]
    >>> doubling_ladder(1)
    [1]
    """
    out, n = [], 1
    while n < top:
        out.append(n)
        n *= 2
    return [*out, top]
