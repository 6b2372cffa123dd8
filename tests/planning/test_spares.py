"""Spares planned in advance (placer.planning.spares, placer solve --survive): the bound, the
availability arithmetic, and on a small fleet every failure re-placed again, independently, and
validated."""

from __future__ import annotations

import json

import pytest

from placer.mapping.validate import validate_mapping
from placer.planning import Placement, Requirements, SolverSettings, plan
from placer.planning.replan import replan
from placer.planning.spares import availability_with, plan_spares, spares_lower_bound
from placer.specs.fleet import fleet_from_dict, load_fleet
from placer.specs.model import model_from_dict
from placer.specs.workload import Workload

MODEL = model_from_dict({"name": "toy8", "layers": [
    {"kind": "linear_attention", "weight_bytes": w, "state_bytes_per_request": 1} for w in (4, 4, 6, 4, 4, 6, 3, 5)]})
FLEET = fleet_from_dict({"name": "toy-racks", "device": {"memory": 10},
                         "fleet": {"racks": 5, "per_rack": 2, "intra_rack_latency_us": 2, "inter_rack_latency_us": 3}})
SOLVER = SolverSettings(time_limit=20, threads=1)


def _plan():
    return plan(MODEL, FLEET, Workload(concurrency=1, context_tokens=1), Requirements(Placement(mode="contiguous")),
                SOLVER)


def test_the_bound_counts_the_worst_failure_of_the_kind():
    assert spares_lower_bound(70, [3] * 32, "1-device") == 71
    assert spares_lower_bound(70, [3] * 32, "1-rack") == 73        # 3 per rack: 73 - 3 = 70 left
    assert spares_lower_bound(4, [2, 2, 2], "1-rack") == 6
    assert spares_lower_bound(5, [2, 2, 2], "1-rack") is None       # 6 devices, 2 lost: 4 left
    assert spares_lower_bound(6, [2, 2, 2], "1-device") is None
    assert spares_lower_bound(3, [1, 1, 1, 1], "1-rack") == 4


def test_availability_with_and_without_spares():
    assert availability_with(0.9, [0, 0, 1], "1-device") == pytest.approx(0.9 ** 3 + 3 * 0.9 ** 2 * 0.1)
    assert availability_with(0.9, [0, 0, 1], "1-rack") == pytest.approx(0.729 + 0.19 * 0.9 + 0.1 * 0.81)


@pytest.mark.parametrize("survive", ["1-device", "1-rack"])
def test_every_failure_has_a_valid_re_placement_checked_one_by_one(survive):
    base = _plan()
    assert base.feasible and base.devices_proven
    spares = plan_spares(base, survive, solver=SOLVER, availability=0.99)
    used = base.result.devices_used
    racks = {d.rack for d in FLEET.devices}
    assert spares.survives and spares.proven
    assert spares.devices == spares.lower_bound == spares_lower_bound(used, [2] * len(racks), survive)
    kept = {FLEET.devices[d].id for d in spares.provisioned}
    provisioned = FLEET.without([d.id for d in FLEET.devices if d.id not in kept])
    # every failure of the kind, re-placed here again by CP-SAT (moved bytes first) and validated
    if survive == "1-device":
        failures = [[d] for d in sorted(kept)]
    else:
        failures = [[d.id for d in FLEET.devices if d.rack == r and d.id in kept] for r in racks]
        failures = [f for f in failures if f]
    assert sorted(tuple(sorted(f.failed)) for f in spares.failures) == sorted(tuple(sorted(f)) for f in failures)
    by_failure = {tuple(sorted(f.failed)): f for f in spares.failures}
    for failed in failures:
        again = replan(base, failed, hardware=provisioned, solver=SOLVER, fresh=False)
        assert again.feasible and again.proven, (failed, again.solved.result.message)
        survivors = provisioned.without(failed)
        assert validate_mapping(again.mapping, model=MODEL, fleet=survivors) == []
        assert not set(failed) & {s["device"] for s in again.mapping["stages"]}
        assert by_failure[tuple(sorted(failed))].moved == again.moved
    worst = spares.worst
    assert worst.moved == max(f.moved for f in spares.failures) > 0 and worst.proven
    assert spares.pipeline_availability(False) == pytest.approx(0.99 ** used)
    assert spares.pipeline_availability(True) > spares.pipeline_availability(False)


@pytest.mark.slow
def test_kimi_k3_on_wafers_survives_any_one_wafer_with_one_spare(run_cli):
    code, out, err = run_cli(["solve", "kimi-k3", "-H", "wse-3t", "--survive", "1-device", "-q", "--threads", "1"])
    assert code == 0, err
    assert "survive 1-device: 71 devices (70 of the plan + 1 spare: " in out and "lower bound 71, proven" in out
    assert "71 failures checked: " in out and "every re-placement validated" in out
    assert "worst failure: r0w0, moves 32.26 GB of weights (the least possible, proven)" in out
    code, out, err = run_cli(["solve", "kimi-k3", "-H", "wse-3t", "--survive", "1-rack", "--json", "-q",
                              "--threads", "1"])
    assert code == 0, err
    spares = json.loads(out)["spares"]
    assert spares["devices"] == spares["lower_bound"] == 73 and spares["proven"] and spares["survives"]
    assert spares["worst"]["moved_bytes"] == 3 * 16129032258 * 4 // 3     # a rack of 2 + 1 + 1 layers


def test_survive_refuses_what_it_cannot_plan(run_cli):
    for argv in (["--survive", "1-device", "--min-user-tps", "100"], ["--availability", "0.99"],
                 ["--survive", "1-device", "--availability", "1.5"], ["--survive", "2-racks"]):
        code, out, err = run_cli(["solve", "kimi-k3", "-H", "wse-3t", *argv])
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, (argv, err)


def test_the_spares_cost_is_counted_where_the_hardware_has_a_price():
    base = _plan()
    spares = plan_spares(base, "1-device", solver=SOLVER)
    assert spares.price_per_hour(False) is None            # the toy fleet has no price: block
    h100 = plan(MODEL, load_fleet("h100"), Workload(concurrency=1, context_tokens=1),
                Requirements(Placement(mode="contiguous", degrees=(1,))), SOLVER)
    spares = plan_spares(h100, "1-device", solver=SOLVER)
    assert spares.survives and spares.devices == h100.result.devices_used + 1
    assert spares.price_per_hour(True) == pytest.approx(spares.price_per_hour(False) + 39.33 / 8)
    assert spares.to_dict()["price_per_hour"]["with_spares"] == spares.price_per_hour(True)
