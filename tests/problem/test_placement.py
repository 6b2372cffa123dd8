"""Result and Level: fields evaluate() fills in by hand, the Level proof invariant, devices_proven."""

from __future__ import annotations

import pytest
from algo_instances import instance

from placer.problem.placement import Level, Result, Stage, Status, evaluate, hops_of, stages_of


def test_a_level_cannot_be_proven_with_a_value_other_than_its_bound():
    with pytest.raises(ValueError, match="level devices: proven with value 3 != bound 2"):
        Level("devices", 3, 2, True)
    assert Level("devices", 3, 2, False).bound == 2
    assert Level("latency", 4.0, 4.0, True).proven


def test_stages_hops_and_evaluate_by_hand():
    """Nodes of 4, 3, 3, 1 B (1 B per request) on devices of 10 B in one rack (2 us per hop), placed
    0,0 | 2 | 1: three stages in order of first visit, two hops of 2 us; the ceilings are
    (10-7)//2 = 1, (10-3)//1 = 7, (10-1)//1 = 9, so the placement holds 1 live request."""
    inst = instance([4, 3, 3, 1], 10)
    a = (0, 0, 2, 1)
    assert stages_of(inst, a) == [Stage(0, 0, (0, 1)), Stage(1, 2, (2,)), Stage(2, 1, (3,))]
    assert hops_of(inst, a) == (2, 4.0)
    r = evaluate(inst, a, method="m", status=Status.FEASIBLE, lower_bound=2)
    assert (r.devices_used, r.hops, r.hop_latency_us, r.concurrency_ceiling) == (3, 2, 4.0, 1)
    assert r.feasible and r.mode == "contiguous" and r.lower_bound_devices == 2
    assert not r.devices_proven


def _r(**kw):
    return Result(method="m", mode="free", status=Status.FEASIBLE, **kw)


def test_devices_proven_each_way_and_not_otherwise():
    assert not _r().devices_proven                                           # no placement
    assert not _r(devices_used=3, lower_bound_devices=2).devices_proven
    assert _r(devices_used=2, lower_bound_devices=2).devices_proven          # meets the bound
    assert _r(devices_used=3, lower_bound_devices=2, proven_optimal=True).devices_proven
    levels = (Level("devices", 3, 3, True), Level("latency", 5.0, 2.0, False))
    assert _r(devices_used=3, lower_bound_devices=2, levels=levels).devices_proven
    levels = (Level("devices", 3, 2, False), Level("latency", 5.0, 5.0, True))
    assert not _r(devices_used=3, lower_bound_devices=2, levels=levels).devices_proven
    assert not _r(devices_used=None, proven_optimal=True).devices_proven


def test_level_lookup_and_replace():
    r = _r(devices_used=3, levels=(Level("devices", 3, 3, True),))
    assert r.level("devices").value == 3 and r.level("latency") is None
    assert r.replace(devices_used=4).devices_used == 4 and r.devices_used == 3
