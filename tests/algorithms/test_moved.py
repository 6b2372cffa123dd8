"""The moved level (placer.algorithms.cpsat.moved): the fewest weight bytes loaded anew after a
failure, checked against every placement of tiny instances."""

from __future__ import annotations

from itertools import product

import pytest
from algo_instances import fleet, instance

from placer.algorithms import place
from placer.algorithms.check import PlacementBug, check_placement
from placer.algorithms.cpsat.moved import Previous, moved_bytes, substitute
from placer.algorithms.objectives import parse_objective
from placer.problem.placement import Status, evaluate


def _valid(inst, assignment) -> bool:
    try:
        check_placement(inst, evaluate(inst, assignment, method="brute", status=Status.HEURISTIC))
    except PlacementBug:
        return False
    return True


def _brute(inst, previous):
    """(fewest bytes moved, fewest devices at that) over every placement."""
    best = None
    for a in product(range(inst.n_devices), repeat=inst.n_nodes):
        if _valid(inst, a):
            key = (moved_bytes(inst, previous, a), len(set(a)))
            best = key if best is None or key < best else best
    return best


def _lose(inst, old, lost):
    """The instance without devices ``lost`` (ids) and the previous placement on it."""
    assert set(lost) <= set(inst.fleet.by_id)
    after = inst.with_fleet(inst.fleet.without(lost))
    index = {d.id: j for j, d in enumerate(after.devices)}
    ids = [inst.devices[d].id for d in old]
    return after, tuple(index.get(i, -(inst.device_index[i] + 1)) for i in ids)


CASES = [
    # weights, capacity, racks, per_rack, mode, old placement (device indices), lost devices
    ([5, 3, 4, 6, 2], 10, 2, 3, "contiguous", (0, 0, 1, 2, 2), ["r0w1"]),
    ([5, 3, 4, 6, 2], 10, 2, 3, "contiguous", (0, 0, 1, 2, 2), ["r0w0", "r0w1"]),
    ([4, 4, 4, 4, 4], 8, 2, 2, "contiguous", (0, 0, 1, 1, 2), ["r0w1"]),
    ([5, 3, 4, 6, 2], 10, 2, 3, "free", (0, 1, 0, 2, 1), ["r0w0"]),
    ([6, 6, 3, 3, 2], 9, 1, 4, "contiguous", (0, 1, 2, 2, 3), ["r0w1"]),
]


@pytest.mark.parametrize("weights,cap,racks,per_rack,mode,old,lost", CASES)
def test_moved_level_meets_every_placement(weights, cap, racks, per_rack, mode, old, lost):
    inst = instance(weights, mode=mode, fleet_spec=fleet(cap, racks=racks, per_rack=per_rack))
    assert _valid(inst, old)
    after, previous = _lose(inst, old, lost)
    r = place(after, "cpsat", objective="moved,devices,latency", hint=Previous(previous), time_limit=20, threads=1)
    expected = _brute(after, previous)
    if expected is None:
        assert r.status == Status.INFEASIBLE
        return
    assert r.feasible and r.proven_optimal, r.message
    moved, devices = r.level("moved"), r.level("devices")
    assert [lv.name for lv in r.levels] == ["moved", "devices", "latency"]
    assert moved.value == moved_bytes(after, previous, r.assignment) == expected[0] and moved.proven
    assert devices.value == r.devices_used == expected[1] and devices.proven


def test_a_spare_takes_the_lost_stage_and_moves_only_its_bytes():
    inst = instance([5, 3, 4, 6, 2], fleet_spec=fleet(10, racks=2, per_rack=3))
    after, previous = _lose(inst, (0, 0, 1, 2, 2), ["r0w1"])
    start = substitute(after, previous)
    assert start is not None and _valid(after, start[0])
    assert moved_bytes(after, previous, start[0]) == 4          # layer 2's bytes, nothing else
    full = fleet(10, racks=1, per_rack=3)                         # no spare: no substitution
    inst = instance([5, 3, 4, 6, 2], fleet_spec=full)
    after, previous = _lose(inst, (0, 0, 1, 2, 2), ["r0w1"])
    assert substitute(after, previous) is None


def test_moved_bytes_beat_a_fresh_solve_that_shifts_the_pipeline():
    inst = instance([4, 4, 4, 4, 4, 4], fleet_spec=fleet(8, racks=1, per_rack=5))
    after, previous = _lose(inst, (0, 0, 1, 1, 2, 2), ["r0w0"])
    r = place(after, "cpsat", objective="moved,devices,latency", hint=Previous(previous), time_limit=20, threads=1)
    fresh = place(after, "cpsat", objective="devices,latency", time_limit=20, threads=1)
    assert r.level("moved").value == 8 and r.level("moved").proven
    assert moved_bytes(after, previous, fresh.assignment) >= r.level("moved").value


def test_the_moved_level_comes_first_and_needs_the_previous_placement():
    assert parse_objective("moved,devices,concurrency,latency")[0] == "moved"
    with pytest.raises(ValueError, match="first"):
        parse_objective("devices,moved")
    inst = instance([4, 4], fleet_spec=fleet(8, racks=1, per_rack=2))
    with pytest.raises(ValueError, match="previous"):
        place(inst, "cpsat", objective="moved,devices")
    with pytest.raises(ValueError, match="previous"):
        place(inst, "cpsat", objective="devices", hint=Previous((0, 0)))
