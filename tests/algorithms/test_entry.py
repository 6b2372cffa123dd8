"""place(): infeasible requests, the largest feasible concurrency, pins, the exact re-check."""

from __future__ import annotations

import pytest
from algo_instances import brute_min_stages, fleet, instance

from placer.algorithms import PlacementBug, max_feasible_concurrency, place
from placer.algorithms.check import check_placement
from placer.problem.instance import make_instance
from placer.problem.placement import Status, evaluate, stages_of
from placer.specs.errors import InvalidSpec
from placer.specs.fleet import load_fleet
from placer.specs.model import load_model, model_from_dict
from placer.specs.workload import Workload, workload_for


@pytest.fixture(scope="module")
def kimi():
    m = load_model("kimi-k3")
    return m, load_fleet("wse-3t"), workload_for(m)


def test_a_layer_bigger_than_every_device_is_infeasible_and_named():
    inst = instance([5, 12, 5], 10)
    for method in ("dp", "greedy"):
        r = place(inst, method)
        assert r.status == Status.INFEASIBLE and r.assignment is None
        assert "layers.1" in r.message and "12 B" in r.message and "holds 10 B" in r.message
        assert r.max_concurrency is None   # weights alone: no concurrency helps


def test_kimi_k3_beyond_184_live_requests_is_infeasible(kimi):
    """185 requests x 150,994,944 B of MLA cache + 16.13 GB of weights exceed a 44 GB wafer."""
    m, fl, wl = kimi
    inst = make_instance(m, fl, wl.replace(concurrency=185))
    r = place(inst, "dp")
    assert r.status == Status.INFEASIBLE and r.max_concurrency == 184
    assert "layers.3" in r.message and "44,063,096,898 B" in r.message
    assert place(inst.with_concurrency(184), "dp").feasible


def test_max_feasible_concurrency_when_the_fleet_is_the_limit(kimi):
    """60 wafers: at most 75 requests let an MLA layer share a wafer with a KDA layer (two layers
    per wafer: 47 stages); from 76 on every MLA wafer stands alone and the chain needs 70 > 60.
    2 x 16,129,032,258 + 75 x (150,994,944 + 4,341,760) = 43,908,317,316 <= 43,999,971,328; 76 not."""
    m, _, wl = kimi
    inst = make_instance(m, load_fleet("wse-3t", racks=20), wl)
    c = max_feasible_concurrency(inst)
    assert c == 75
    fits = place(inst.with_concurrency(c), "dp")
    assert fits.feasible and fits.devices_used <= 60
    over = place(inst.with_concurrency(c + 1), "dp")
    assert over.status == Status.INFEASIBLE and over.max_concurrency == 75
    r = place(inst, "dp")
    assert r.status == Status.INFEASIBLE and r.max_concurrency == 75 and "60 available" in r.message
    # the bounds give the other side: nothing above 75 can fit either
    assert max_feasible_concurrency(inst, "bound") == 75


def test_max_feasible_concurrency_edges():
    # no per-request memory (embedding and head only): no limit
    model = model_from_dict({"name": "heads", "layers": [{"kind": "embedding", "weight_bytes": 4},
                                                         {"kind": "lm_head", "weight_bytes": 4}]})
    assert max_feasible_concurrency(make_instance(model, fleet(10, per_rack=2), Workload())) is None
    # 1 B of state per request per node: 4 + c <= 10 with one node per device
    assert max_feasible_concurrency(instance([4, 4], 10)) == 6
    # weights alone overflow: -1
    assert max_feasible_concurrency(instance([4, 12], 10)) == -1
    # KV: 6 + 1 x c <= 10 on the dense node's device: c <= 4 (context 1 token, 1 B per token)
    assert max_feasible_concurrency(instance([6, 6], 10, kv=[1, 0])) == 4


def test_pins_are_honoured_by_every_method_that_takes_them():
    weights = [3, 3, 3, 3, 3, 3]
    for mode, methods in (("contiguous", ("dp", "greedy")), ("free", ("ffd",))):
        inst = instance(weights, 9, mode=mode, pins=["2=r0w4", "4-5"])
        for method in methods:
            r = place(inst, method)
            assert r.feasible, (mode, method, r.message)
            assert inst.devices[r.assignment[2]].id == "r0w4"
            assert r.assignment[4] == r.assignment[5]


def test_contiguous_pins_can_cost_a_device_and_dp_stays_exact():
    """[3] x 6 on 9-byte devices: 2 stages of three (0-2 | 3-5). "2-3 on one device" removes that
    cut; a stage holds three nodes, so 2 and 3 share one with node 1 or 4 and a third stage is
    left over: 3 devices."""
    inst = instance([3] * 6, 9, pins=["2-3"])
    r = place(inst, "dp")
    assert r.devices_used == 3 and r.status == Status.OPTIMAL
    assert r.assignment[2] == r.assignment[3]
    assert brute_min_stages([3] * 6, 9) == 2


def test_nodes_pinned_to_two_devices_in_one_run_are_infeasible():
    """Contiguous: node 0 on r0w0 and node 2 on r0w0 force 0-2 onto r0w0; node 1 on r0w1 breaks it."""
    inst = instance([1, 1, 1], 10, pins=["0=r0w0", "2=r0w0", "1=r0w1"])
    r = place(inst, "dp")
    assert r.status == Status.INFEASIBLE and "r0w0" in r.message and "r0w1" in r.message
    free = instance([1, 1, 1], 10, mode="free", pins=["0=r0w0", "2=r0w0", "1=r0w1"])
    assert place(free, "ffd").feasible


def test_a_pinned_group_larger_than_its_device_is_infeasible():
    inst = instance([6, 6], 10, pins=["0-1"])
    r = place(inst, "greedy")
    assert r.status == Status.INFEASIBLE and "12 B" in r.message


def test_the_exact_check_catches_a_broken_placement():
    inst = instance([6, 6, 6], 10)
    bad = evaluate(inst, [0, 0, 1], method="dp", status=Status.FEASIBLE)   # 12 B on a 10 B device
    with pytest.raises(PlacementBug, match="capacity"):
        check_placement(inst, bad)
    small = instance([4, 4, 4], 10)
    split = evaluate(small, [0, 1, 0], method="dp", status=Status.FEASIBLE)  # device 0 holds two runs
    with pytest.raises(PlacementBug, match="contiguous"):
        check_placement(small, split)
    ok = evaluate(inst, [0, 1, 2], method="dp", status=Status.FEASIBLE)
    check_placement(inst, ok)
    with pytest.raises(PlacementBug, match="reports"):
        check_placement(inst, ok.replace(devices_used=2))


def test_solver_options_are_ignored_by_the_other_methods():
    r = place(instance([4, 4], 10), "dp", time_limit=1.0, seed=3, threads=1)
    assert r.devices_used == 1
    with pytest.raises(TypeError, match="colour"):
        place(instance([4, 4], 10), "dp", colour="red")


def test_unknown_method_and_wrong_mode_are_user_errors():
    inst = instance([1, 1], 10)
    with pytest.raises(InvalidSpec, match="unknown method"):
        place(inst, "magic")
    with pytest.raises(InvalidSpec, match="free mode"):
        place(inst, "typepack")


def test_every_method_result_passes_the_independent_validator(kimi):
    from placer.mapping import build_mapping
    from placer.mapping.validate import validate_mapping

    m, fl, wl = kimi
    for mode, gran, methods in (("contiguous", "layer", ("dp", "greedy")),
                                ("free", "layer", ("typepack", "ffd")),
                                ("split", "shards:4", ("dp", "greedy"))):
        inst = make_instance(m, fl, wl, mode=mode, granularity=gran)
        for method in methods:
            r = place(inst, method)
            doc = build_mapping(inst, r)
            assert validate_mapping(doc) == [], (mode, method)
            assert len(stages_of(inst, r.assignment)) == r.devices_used


def test_a_count_below_the_lower_bound_is_a_bug(monkeypatch):
    """place() refuses a placement that undercuts its own lower bound (the bound or the method is
    wrong): with the bound inflated to 5, greedy's valid 2-device placement must raise."""
    from placer.algorithms import entry

    inst = instance([6, 6, 6], 12)
    assert place(inst, "greedy").devices_used == 2
    monkeypatch.setattr(entry, "bounds", lambda instance: {"volume": 3})
    with pytest.raises(PlacementBug, match="below the lower bound 3"):
        place(inst, "greedy")


def test_the_placement_is_checked_once(monkeypatch):
    from placer.algorithms import entry

    calls = []
    real = entry.check_placement
    monkeypatch.setattr(entry, "check_placement", lambda i, r: (calls.append(r.method), real(i, r)))
    place(instance([3, 4, 5], 8, racks=1, per_rack=3), "cpsat", time_limit=5, threads=1)
    assert calls == ["cpsat"]
