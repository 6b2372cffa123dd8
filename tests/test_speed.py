"""Speed floors in planning: every plan re-checked by an independent simulation of its mapping,
and one device fewer breaks the plan or lowers the live requests it holds at the floor."""

from __future__ import annotations

import json

import pytest

from placer import load_fleet, load_model, workload_for
from placer.errors import InvalidSpec
from placer.mapping import build_mapping
from placer.simulate import simulate_mapping
from placer.speed import floor_from, plan_for_speed

CASES = [  # model, fleet, context, planned live requests, floor (tokens/s per user)
    ("llama-3.1-70b", "h200", "8k", 64, 20.0),
    ("llama-3.1-8b", "h100", "8k", 300, 30.0),
]


def _plan(name, hw, ctx, live, floor, fleet=None):
    model = load_model(name)
    fleet = fleet or load_fleet(hw)
    return plan_for_speed(model, fleet, workload_for(model, context=ctx, concurrency=live), min_user_tps=floor,
                          method="dp"), fleet


@pytest.mark.parametrize("name, hw, ctx, live, floor", CASES)
def test_plan_meets_the_floor_and_a_device_fewer_does_not(name, hw, ctx, live, floor):
    plan, fleet = _plan(name, hw, ctx, live, floor)
    c = plan.chosen
    assert plan.feasible and c is not None
    assert c.replicas * c.load >= live and c.held >= live
    # re-check: the mapping document, simulated afresh at the load one replica serves
    doc = build_mapping(c.shape.instance, c.shape.result)
    sim = simulate_mapping(doc, requests=c.load, max_live=c.load, output_tokens=16)
    assert sim.per_user_tokens_per_s >= floor
    assert sim.per_user_tokens_per_s == pytest.approx(c.sim.per_user_tokens_per_s, rel=1e-9)
    # and at the concurrency it claims to hold per replica
    at_held = simulate_mapping(doc, requests=c.shape.held, max_live=c.shape.held, output_tokens=16)
    assert at_held.per_user_tokens_per_s >= floor
    # the same plan with one device fewer in the fleet: no plan, or fewer live requests held
    keep = c.devices - 1
    ids = [d.id for d in fleet.available]
    smaller = fleet.without(ids[keep:])
    assert len(smaller.available) == keep
    fewer, _ = _plan(name, hw, ctx, live, floor, fleet=smaller)
    assert not fewer.feasible
    most = max(s.held * (keep // s.devices) for s in fewer.shapes)
    assert most < live and "not for" in fewer.message


def test_a_floor_out_of_reach_names_the_fastest_placement():
    plan, _ = _plan("llama-3.1-70b", "h200", "8k", 8, 500.0)
    assert not plan.feasible and plan.fastest is not None
    assert "cannot be met" in plan.message and f"{plan.fastest.alone_tokens_per_s:,.1f}" in plan.message
    # the closed-form single-request speed bounds every simulated one of that shape
    doc = build_mapping(plan.fastest.instance, plan.fastest.result)
    assert simulate_mapping(doc, requests=1, output_tokens=16).per_user_tokens_per_s <= \
        plan.fastest.alone_tokens_per_s * (1 + 1e-9)


def test_objectives_pick_their_candidate():
    plans = {o: plan_for_speed(load_model("llama-3.1-70b"), load_fleet("h200"),
                               workload_for(load_model("llama-3.1-70b"), context="8k", concurrency=64),
                               min_user_tps=20.0, objective=o, method="dp") for o in ("devices", "tokens-per-mw")}
    cands = plans["devices"].candidates
    assert plans["devices"].chosen.devices == min(x.devices for x in cands)
    assert plans["tokens-per-mw"].chosen.tokens_per_s_per_mw == max(x.tokens_per_s_per_mw for x in cands)


def test_floor_arguments():
    assert floor_from(max_itl_ms=4.0) == 250.0 and floor_from(min_user_tps=100) == 100.0
    for kw, field in [(dict(), "min_user_tps"), (dict(min_user_tps=1, max_itl_ms=1), "min_user_tps"),
                      (dict(min_user_tps=0), "min_user_tps"), (dict(max_itl_ms=-1), "max_itl_ms")]:
        with pytest.raises(InvalidSpec, match=field):
            floor_from(**kw)


def test_solve_command_with_a_floor(run_cli, tmp_path):
    plan, _ = _plan("llama-3.1-70b", "h200", "8k", 64, 20.0)
    out = tmp_path / "plan.json"
    code, text, err = run_cli(["solve", "llama-3.1-70b", "-H", "h200", "--concurrency", 64, "--max-itl-ms", 50,
                               "--method", "dp", "-o", out])
    assert code == 0, err
    assert plan.message in text and f"holds {plan.chosen.held} live requests at the floor" in text
    assert json.loads(out.read_text())["summary"]["devices_used"] == plan.chosen.shape.devices
    code, text, err = run_cli(["solve", "llama-3.1-70b", "-H", "h200", "--concurrency", 8, "--min-user-tps", 500,
                               "--method", "dp", "--json"])
    assert code == 1
    assert json.loads(text)["speed_target"]["feasible"] is False
