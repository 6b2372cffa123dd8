"""Free-mode chains on racked fleets: the crossing bound (placer.algorithms.cpsat.fleet.level_runs,
levels.chain_runs_bound) against the brute-force oracle, and the rack-runs start
(placer.algorithms.rackruns) by hand and against the oracle."""

from __future__ import annotations

import random
import time
from fractions import Fraction

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import solve as oracle_solve

from placer.algorithms import place
from placer.algorithms.cpsat.levels import chain_runs_bound
from placer.algorithms.cpsat.run import Run, build_problem
from placer.algorithms.rackruns import rack_runs
from placer.problem.instance import make_instance
from placer.problem.placement import hops_of
from placer.specs.fleet import fleet_from_dict
from placer.specs.model import model_from_dict
from placer.specs.workload import Workload


def _instance(layers, spec):
    model = model_from_dict({"name": "m", "layers": layers})
    return make_instance(model, fleet_from_dict(spec), Workload(concurrency=0, context_tokens=1), mode="free")


def _bound_us(inst, devices: int) -> Fraction:
    run = Run(inst, time.monotonic(), 10.0, 0, 1, None, "lex")
    run.prob, run.quant = build_problem(inst)
    return Fraction(chain_runs_bound(run, devices), run.prob.lat_scale)


def _kimi_like():
    # S = 4 B, L = 9 B on 10 B devices: an L sits alone, two S share a device
    s = {"kind": "linear_attention", "weight_bytes": 4, "state_bytes_per_request": 1}
    big = {"kind": "attention", "weight_bytes": 9, "kv_bytes_per_token": 1}
    layers = [s, s, s, big, s, s, s, big, big]
    spec = {"name": "hw", "device": {"memory": 10},
            "fleet": {"racks": 3, "per_rack": 3, "intra_rack_latency_us": 2, "inter_rack_latency_us": 3}}
    return layers, spec


def test_crossing_bound_and_rack_runs_by_hand():
    layers, spec = _kimi_like()
    inst = _instance(layers, spec)
    # fewest devices: three L alone, six S two by two = 6. Device changes: next-fit on 10 B gives
    # [S S][S][L][S S][S][L][L], 7 pieces, 6 changes. Rack changes: a run packed into one rack's
    # three devices holds [S S S L S] (L, S+S, S+S) then [S S L L]: 2 runs, 1 change.
    # Bound: 6 x 2 us + 1 x (3 - 2) us = 13 us.
    assert _bound_us(inst, 6) == 13
    # rack runs reaches it: [S0 S1 | S2 S4 | L3] on one rack, [S5 S6 | L7 | L8] on another
    a = rack_runs(inst, 6)
    assert a is not None and len(set(a)) == 6
    assert hops_of(inst, a)[1] == 13.0
    racks = [inst.devices[d].rack for d in a]
    assert racks[:5] == [racks[0]] * 5 and racks[5:] == [racks[5]] * 4 and racks[0] != racks[5]
    assert a[2] == a[4] and a[0] == a[1]
    # and CP-SAT proves it without a search
    r = place(inst, "cpsat", time_limit=10, threads=1, seed=0, objective="lex")
    assert r.devices_used == 6 and r.hop_latency_us == 13.0 and r.proven_optimal
    assert r.level("latency").proven


def test_rack_runs_declines_what_it_cannot_do():
    layers, spec = _kimi_like()
    inst = _instance(layers, spec)
    assert rack_runs(inst, 5) is None            # 6 devices are needed
    one_rack = dict(spec, fleet=dict(spec["fleet"], racks=1, per_rack=9))
    assert rack_runs(_instance(layers, one_rack), 9) is None


def _random_racked(seed: int):
    rng = random.Random(seed)
    racks = rng.randint(2, 3)
    per_rack = rng.randint(1, 3) if racks == 3 else rng.randint(2, 3)
    while racks * per_rack > 6:
        per_rack -= 1
    mem = rng.randint(10, 20)
    intra = round(rng.uniform(0.5, 3), rng.choice([0, 1, 3]))
    inter = round(intra + rng.uniform(0, 4), rng.choice([0, 2, 4]))
    spec = {"name": "hw", "device": {"memory": mem},
            "fleet": {"racks": racks, "per_rack": per_rack, "intra_rack_latency_us": intra,
                      "inter_rack_latency_us": inter}}
    n = rng.randint(2, 5)
    layers = [{"kind": "attention", "weight_bytes": rng.randint(2, mem), "kv_bytes_per_token": 1} for _ in range(n)]
    return layers, spec


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**9))
def test_crossing_bound_never_exceeds_the_oracle(seed):
    layers, spec = _random_racked(seed)
    opt = oracle_solve(layers, spec, mode="free")
    if opt.devices is None:
        return
    inst = _instance(layers, spec)
    assert _bound_us(inst, opt.devices) <= opt.latency
    r = place(inst, "cpsat", time_limit=10, threads=1, seed=0, objective="lex")
    assert r.devices_used == opt.devices
    lat = r.level("latency")
    assert Fraction(str(lat.bound)) <= opt.latency + Fraction(1, 10**9)
    if lat.proven:
        assert abs(Fraction(str(r.hop_latency_us)) - opt.latency) <= Fraction(1, 10**9)
    a = rack_runs(inst, opt.devices)
    if a is not None:
        load: dict[int, int] = {}
        for node, d in enumerate(a):
            load[d] = load.get(d, 0) + inst.demand_bytes[node]
        assert all(b <= inst.capacity_bytes[d] for d, b in load.items())
        assert len(set(a)) == opt.devices
        assert Fraction(str(hops_of(inst, a)[1])) >= opt.latency - Fraction(1, 10**9)
