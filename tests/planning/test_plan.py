"""Replica planning and budget bisection on a tiny chain whose answers are worked out by hand.

The model is L A L on devices of 100 B (no activation buffers: the layers carry no hidden size):
L = 20 B of weights + 1 B of state per request, A = 20 B + 10 B of KV per request (10 tokens x
1 B). A contiguous run of L A L holds c requests in 60 + 12c bytes, L A in 40 + 11c, A alone in
20 + 10c. So the fewest devices m(c) are 1 for c <= 3, 2 for c <= 5 ([L A][L]), 3 for c <= 8,
and nothing holds c >= 9 (A alone overflows).
"""

from __future__ import annotations

import json

import pytest

from placer.algorithms import place
from placer.planning.budget import largest_concurrency, min_devices, plan_replicas
from placer.problem.instance import make_instance
from placer.specs.errors import InvalidSpec
from placer.specs.fleet import fleet_from_dict
from placer.specs.model import model_from_dict
from placer.specs.workload import Workload

TINY_MODEL = {"name": "tiny", "layers": [
    {"kind": "linear_attention", "weight_bytes": 20, "state_bytes_per_request": 1},
    {"kind": "attention", "weight_bytes": 20, "kv_bytes_per_token": 1},
    {"kind": "linear_attention", "weight_bytes": 20, "state_bytes_per_request": 1},
]}


def toy_fleet(racks=4, per_rack=2):
    return fleet_from_dict({"name": "toy", "device": {"memory": "100 B"},
                            "fleet": {"racks": racks, "per_rack": per_rack}})


def tiny_instance(concurrency=1, fleet=None):
    model = model_from_dict(TINY_MODEL)
    return make_instance(model, fleet or toy_fleet(), Workload(context_tokens=10, concurrency=concurrency))


def test_tiny_instance_is_what_the_module_docstring_says():
    inst = tiny_instance()
    assert inst.capacity_bytes[0] == 100
    assert inst.weight_bytes == (20, 20, 20)
    assert inst.request_bytes == (1, 10, 1)
    expected = {1: 1, 3: 1, 4: 2, 5: 2, 6: 3, 8: 3}
    for c, m in expected.items():
        assert min_devices(inst.with_concurrency(c), "dp").devices_used == m, c
    assert min_devices(inst.with_concurrency(9), "dp").status == "infeasible"


def test_two_replicas_beat_one_pipeline():
    # N = 6: one pipeline of 6 needs 3 devices; two of 3 need 1 each; k = 3 needs >= 3 x m(1) = 3.
    plan = plan_replicas(tiny_instance(), 6, method="dp")
    rows = [(o.replicas, o.replica_concurrency, o.devices_per_replica, o.total_devices) for o in plan.options]
    assert rows == [(1, 6, 3, 3), (2, 3, 1, 2)]
    assert plan.best.replicas == 2 and plan.best.total_devices == 2
    assert plan.saving_devices == 1
    assert "saves 1 device (33.3%)" in plan.summary()
    assert "3 replicas need at least 3 x 1 = 3" in plan.stop_reason


def test_one_pipeline_impossible_replicas_possible():
    # N = 10: c = 10 fits nowhere; k = 2 -> 2 x m(5) = 4; k = 3 -> 3 x m(4) = 6; k = 4 needs >= 4.
    plan = plan_replicas(tiny_instance(), 10, method="dp")
    rows = [(o.replicas, o.replica_concurrency, o.devices_per_replica, o.total_devices, o.status)
            for o in plan.options]
    assert rows == [(1, 10, None, None, "infeasible"), (2, 5, 2, 4, "optimal"), (3, 4, 2, 6, "optimal")]
    assert plan.best.replicas == 2
    assert plan.saving_devices is None          # nothing to compare with
    assert "one pipeline cannot hold them" in plan.summary()


def test_replicas_must_fit_the_fleet_together():
    # Three devices: two replicas of 5 need 4, three of 4 need 6, four would need at least 4.
    plan = plan_replicas(tiny_instance(fleet=toy_fleet(1, 3)), 10, method="dp")
    assert [(o.replicas, o.total_devices, o.fits_fleet) for o in plan.options] == [
        (1, None, False), (2, 4, False), (3, 6, False)]
    assert plan.best is None
    assert "4 replicas need at least 4 devices; the fleet has 3" == plan.stop_reason


def test_skips_replica_counts_with_the_same_replica_concurrency():
    # N = 3: k = 2 and k = 3 would hold 2 and 1 each, but m(3) = 1 already, so k = 2 needs >= 2.
    plan = plan_replicas(tiny_instance(), 3, method="dp")
    assert [o.replicas for o in plan.options] == [1]
    assert plan.best.total_devices == 1 and plan.best.replicas == 1


def test_bad_total_concurrency():
    with pytest.raises(InvalidSpec):
        plan_replicas(tiny_instance(), 0)


@pytest.mark.parametrize("budget, expected", [(1, 3), (2, 5), (3, 8), (8, 8)])
def test_bisection_finds_the_largest_concurrency(budget, expected):
    inst = tiny_instance()
    search = largest_concurrency(inst, budget, method="dp")
    assert search.concurrency == expected and search.proven
    # c fits in the budget and c + 1 does not (checked with direct solves)
    at = place(inst.with_concurrency(expected), method="dp")
    assert at.feasible and at.devices_used <= budget
    above = place(inst.with_concurrency(expected + 1), method="dp")
    assert not above.feasible or above.devices_used > budget
    assert search.result.devices_used == at.devices_used


def test_bisection_uses_logarithmically_many_solves():
    calls = []
    inst = tiny_instance()

    def counting_place(instance, method="dp", **kw):
        calls.append(instance.workload.concurrency)
        return place(instance, method=method, **kw)

    import placer.algorithms as algorithms
    original = algorithms.place
    algorithms.place = counting_place
    try:
        search = largest_concurrency(inst, 2, method="dp")
    finally:
        algorithms.place = original
    # 1, 2, 4 fit, 8 does not; then 6, 5: six solves, never a scan; concurrency above the cap of 8
    # (A alone holds at most 8) is never solved
    assert search.concurrency == 5
    assert calls == [1, 2, 4, 8, 6, 5]
    assert search.solves == 6


def test_bisection_when_nothing_fits():
    inst = tiny_instance(fleet=fleet_from_dict({"name": "small", "device": {"memory": "25 B"},
                                                "fleet": {"racks": 1, "per_rack": 4}}))
    search = largest_concurrency(inst, 4, method="dp")
    # each layer alone: 20 + 10 = 30 B > 25 B for A with one request
    assert search.concurrency == 0 and search.result is None


def test_bisection_refuses_heuristics():
    with pytest.raises(InvalidSpec, match="exact method"):
        largest_concurrency(tiny_instance(), 2, method="greedy")


def test_kimi_k3_budget_of_the_published_contiguous_count():
    # 47 wafers (two layers each) hold 75 requests of 256k; 76 need more (checked independently).
    from placer import load_fleet, load_model, workload_for

    m = load_model("kimi-k3")
    inst = make_instance(m, load_fleet("wse-3t"), workload_for(m))
    search = largest_concurrency(inst, 47, method="dp")
    assert search.concurrency == 75
    assert place(inst.with_concurrency(75), method="dp").devices_used == 47
    assert place(inst.with_concurrency(76), method="dp").devices_used > 47


def test_plan_cli(run_cli, tmp_path):
    import yaml

    model = tmp_path / "tiny.yaml"
    model.write_text(yaml.safe_dump(TINY_MODEL))
    hw = tmp_path / "toy.yaml"
    hw.write_text(yaml.safe_dump({"name": "toy", "device": {"memory": "100 B"},
                                  "fleet": {"racks": 4, "per_rack": 2}}))
    code, out, err = run_cli(["plan", model, "-H", hw, "-n", "6", "--context", "10"])
    assert code == 0, err
    assert "2 replicas of 3 live requests: 2 devices (2 x 1); saves 1 device (33.3%)" in out
    code, out, err = run_cli(["plan", model, "-H", hw, "-n", "6", "--context", "10", "--json"])
    doc = json.loads(out)
    assert doc["best_replicas"] == 2 and doc["saving_devices"] == 1
    assert [r["total_devices"] for r in doc["rows"]] == [3, 2]
    code, out, err = run_cli(["plan", model, "-H", hw, "-n", "0"])
    assert code == 2
