"""Objective levels chosen by the user: guaranteed concurrency (issue 10, item 10) and the
attention-per-stage requirement (item 11), against the brute-force oracle."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import solve as oracle_solve

from placer.algorithms import place
from placer.algorithms.registry import parse_objective
from placer.problem.instance import make_instance
from placer.specs.fleet import fleet_from_dict
from placer.specs.model import model_from_dict
from placer.specs.workload import Workload


def test_objective_orders():
    assert parse_objective("devices,concurrency,latency") == ("devices", "concurrency", "latency")
    assert parse_objective("concurrency,devices") == ("concurrency", "devices")
    assert parse_objective("lex") == ("devices", "latency")
    for bad in ("latency,devices", "devices,devices", "speed", ""):
        with pytest.raises(ValueError):
            parse_objective(bad)


def _inst(layers, spec, mode, c, require=()):
    return make_instance(model_from_dict({"name": "m", "layers": layers}), fleet_from_dict(spec),
                         Workload(concurrency=c, context_tokens=1), mode=mode, require=require)


def _spec(mems, inter=2.0):
    return {"name": "hw", "device_types": {f"t{k}": {"memory": m} for k, m in enumerate(mems)},
            "fleet": {"intra_rack_latency_us": 1, "inter_rack_latency_us": inter, "inter_rack_topology": "line",
                      "groups": [{"device": f"t{k}", "racks": 1, "per_rack": 1} for k in range(len(mems))]}}


def test_concurrency_level_by_hand():
    """Two devices of 100 B; layers of 40, 10, 40 B with 1, 1, 1 B per request. Two devices are
    needed at 4 requests. [40 | 10 40] leaves 60 // 1 and 50 // 2 = 25; [40 10 | 40] leaves 50 // 2
    = 25 and 60: either way 25 requests on every stage, the level's value."""
    layers = [{"kind": "attention", "weight_bytes": w, "kv_bytes_per_token": 1} for w in (40, 10, 40)]
    inst = _inst(layers, _spec([100, 100]), "contiguous", 4)
    r = place(inst, "cpsat", time_limit=20, threads=1, objective="devices,concurrency,latency")
    assert r.devices_used == 2
    lv = r.level("concurrency")
    assert lv is not None and lv.proven and lv.value == 25 == r.concurrency_ceiling
    assert [x.name for x in r.levels] == ["devices", "concurrency", "latency"]
    # with concurrency last, latency first decides and concurrency follows it
    r2 = place(inst, "cpsat", time_limit=20, threads=1, objective="devices,latency,concurrency")
    assert [x.name for x in r2.levels] == ["devices", "latency", "concurrency"]
    assert r2.level("concurrency").proven and r2.level("concurrency").value == 25


def _oracle_concurrency(layers, spec, mode, base):
    k = oracle_solve(layers, spec, mode=mode, concurrency=base).devices
    c = base
    while oracle_solve(layers, spec, mode=mode, concurrency=c + 1).devices == k:
        c += 1
    return k, c


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**9), st.sampled_from(["contiguous", "free"]))
def test_concurrency_level_against_the_oracle(seed, mode):
    rng = random.Random(seed)
    mems = [rng.randint(40, 80) for _ in range(rng.randint(2, 3))]
    layers = [{"kind": "attention", "weight_bytes": rng.randint(5, 25), "kv_bytes_per_token": rng.randint(1, 3)}
              for _ in range(rng.randint(2, 4))]
    spec = _spec(mems, inter=round(rng.uniform(1, 3), 3))
    base = rng.randint(0, 2)
    opt = oracle_solve(layers, spec, mode=mode, concurrency=base)
    r = place(_inst(layers, spec, mode, base), "cpsat", time_limit=10, threads=1,
              objective="devices,concurrency,latency")
    if opt.devices is None:
        assert not r.feasible
        return
    k, c_star = _oracle_concurrency(layers, spec, mode, base)
    assert r.devices_used == k
    lv = r.level("concurrency")
    assert lv.bound is None or lv.bound >= c_star
    assert r.concurrency_ceiling <= c_star if r.concurrency_ceiling is not None else True
    if lv.proven:
        assert lv.value == c_star
        lat = r.level("latency")
        at = oracle_solve(layers, spec, mode=mode, concurrency=c_star)
        if lat is not None and lat.proven:
            assert abs(Fraction(str(r.hop_latency_us)) - at.latency) <= Fraction(1, 10**9)


def test_attention_per_stage_costs_a_device_when_it_must():
    """Layers attention 30, linear 30, linear 30 on devices of 60 B: [A L | L] has a stage of
    linear attention only; with the requirement no two-device placement exists (one attention
    layer, one stage at most) and a 60 B device cannot hold all three: infeasible, with the reason."""
    layers = [{"kind": "attention", "weight_bytes": 30, "kv_bytes_per_token": 1},
              {"kind": "linear_attention", "weight_bytes": 30, "state_bytes_per_request": 1},
              {"kind": "linear_attention", "weight_bytes": 30, "state_bytes_per_request": 1}]
    spec = _spec([60, 60, 60])
    assert place(_inst(layers, spec, "contiguous", 0), "cpsat", time_limit=10, threads=1).devices_used == 2
    r = place(_inst(layers, spec, "contiguous", 0, ("attention-per-stage",)), "cpsat", time_limit=10, threads=1)
    assert r.status == "infeasible" and "attention" in r.message
    # with two attention layers the requirement is met on two devices
    layers[2] = {"kind": "attention", "weight_bytes": 30, "kv_bytes_per_token": 1}
    for mode in ("contiguous", "free"):
        r = place(_inst(layers, spec, mode, 0, ("attention-per-stage",)), "cpsat", time_limit=10, threads=1)
        assert r.devices_used == 2 and r.proven_optimal
        assert {r.assignment[0], r.assignment[2]} == set(r.assignment)
