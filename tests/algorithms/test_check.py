"""placer.algorithms.check: the exact-bytes check every placement passes."""

from __future__ import annotations

import pytest
from algo_instances import instance

from placer.algorithms.check import (
    PlacementBug,
    check_placement,
    fits_bytes,
    overloaded,
    pin_violation,
    stage_order,
)
from placer.problem.placement import Status, evaluate


def test_capacity_in_exact_bytes():
    inst = instance([5, 5, 1], 10, per_rack=3)
    assert fits_bytes(inst, [0, 0, 1])
    assert overloaded(inst, [0, 0, 0]) == [(0, 11)]
    assert not fits_bytes(inst, [0, 0, 0])          # one byte over


def test_pins_in_the_check():
    inst = instance([1, 1, 1], 10, per_rack=3, pins=["0=r0w1", "1-2"])
    assert pin_violation(inst, [1, 0, 0]) is None and fits_bytes(inst, [1, 0, 0])
    assert "r0w1" in pin_violation(inst, [0, 0, 0])
    assert "2 devices" in pin_violation(inst, [1, 0, 2])
    assert not fits_bytes(inst, [1, 0, 2])


def test_check_placement_reports_the_first_violation():
    inst = instance([5, 5, 1], 10, per_rack=3)
    good = evaluate(inst, [0, 0, 1], method="x", status=Status.HEURISTIC)
    check_placement(inst, good)
    with pytest.raises(PlacementBug, match="holds 11 B"):
        check_placement(inst, evaluate(inst, [0, 0, 0], method="x", status=Status.HEURISTIC))
    with pytest.raises(PlacementBug, match="reports 3 devices"):
        check_placement(inst, good.replace(devices_used=3))


def test_stage_order_follows_links():
    inst = instance([1, 1, 1], 10, racks=3, per_rack=1, topology="line")
    assert stage_order(inst, [0, 1, 2]) == [0, 1, 2]
    assert stage_order(inst, [0, 2, 1]) is None      # r0 and r2 are not linked
