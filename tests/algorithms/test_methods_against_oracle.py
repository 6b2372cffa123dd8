"""Every method on random small instances against the independent brute-force oracle
(tests/oracle.py: its own byte arithmetic, its own fleet paths, exact decimal latencies).

Contiguous and free mode, pins, unavailable devices, two or three device types. For every method
and every result: a placement is valid and never better than the optimum; a proven level equals
the oracle's optimum; no reported bound exceeds it; INFEASIBLE only when the oracle finds nothing.
"""

from __future__ import annotations

import random
from fractions import Fraction

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from oracle import fleet_devices, hop_costs
from oracle import solve as oracle_solve

from placer.algorithms import MODES_OF, PLACING_METHODS, place
from placer.problem.instance import make_instance
from placer.problem.placement import Status
from placer.specs.fleet import fleet_from_dict
from placer.specs.model import model_from_dict
from placer.specs.workload import Workload


def _random_case(seed: int, mode: str):
    rng = random.Random(seed)
    n_types = rng.choice([2, 3])
    types = {f"t{k}": {"memory": rng.randint(30, 60)} for k in range(n_types)}
    groups = [{"device": f"t{k}", "racks": 1, "per_rack": rng.randint(1, 2)} for k in range(n_types)]
    fleet = {"intra_rack_latency_us": round(rng.uniform(0.5, 2), 3), "inter_rack_latency_us": round(rng.uniform(1, 5), 4),
             "inter_rack_topology": rng.choice(["full", "line", "ring"]), "groups": groups}
    ids = [f"r{r}w{s}" for r, g in enumerate(groups) for s in range(g["per_rack"])]
    if len(ids) > 2 and rng.random() < 0.4:
        fleet["unavailable"] = [rng.choice(ids)]
    alive = [i for i in ids if i not in fleet.get("unavailable", [])]
    if len(alive) > 2 and rng.random() < 0.5:
        a, b = rng.sample(alive, 2)
        fleet["extra_links"] = [{"a": a, "b": b, "latency_us": round(rng.uniform(0.1, 3), 4)}]
    spec = {"name": "hw", "device_types": types, "fleet": fleet}
    n = rng.randint(2, 5)
    layers = []
    for _ in range(n):
        if rng.random() < 0.6:
            layers.append({"kind": "attention", "weight_bytes": rng.randint(5, 30),
                           "kv_bytes_per_token": rng.randint(1, 3)})
        else:
            layers.append({"kind": "linear_attention", "weight_bytes": rng.randint(5, 30),
                           "state_bytes_per_request": rng.randint(1, 4)})
    concurrency = rng.randint(0, 3)
    pins = {}
    if rng.random() < 0.3:
        pins[rng.randrange(n)] = rng.choice(alive)
    return layers, spec, concurrency, pins


def _connected(spec) -> bool:
    alive, _, direct = fleet_devices(spec)
    cost = hop_costs(alive, direct)
    return all(cost[a, b] is not None for a in alive for b in alive)


def _check(method, r, opt, mode):
    if opt.devices is None:
        assert not r.feasible, (method, r.message)
        return
    if r.status == Status.INFEASIBLE:
        raise AssertionError(f"{method} says infeasible; the oracle places on {opt.devices}: {r.message}")
    if r.lower_bound_devices is not None:
        assert r.lower_bound_devices <= opt.devices, (method, r.message)
    if not r.feasible:
        return
    assert r.devices_used >= opt.devices
    dev = r.level("devices")
    if dev is not None and dev.bound is not None:
        assert dev.bound <= opt.devices, (method, r.message)
    if r.devices_proven:
        assert r.devices_used == opt.devices, (method, r.message)
    lat = r.level("latency")
    if lat is not None and r.devices_used == opt.devices:
        if lat.bound is not None:
            assert Fraction(str(lat.bound)) <= opt.latency + Fraction(1, 10**9), (method, r.message)
        if lat.proven:
            assert abs(Fraction(str(r.hop_latency_us)) - opt.latency) <= Fraction(1, 10**9), (method, r.message)
    if r.proven_optimal and lat is not None and method == "cpsat":
        # CP-SAT's optimal means every level proven (then each is checked above); dp's and the path
        # walk's speak of the device count, their latency level of its own proof
        assert all(lv.proven for lv in r.levels), (method, r.message)
        assert abs(Fraction(str(r.hop_latency_us)) - opt.latency) <= Fraction(1, 10**9), (method, r.message)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**9), st.sampled_from(["contiguous", "free"]))
def test_every_method_is_honest_against_the_oracle(seed, mode):
    layers, spec, concurrency, pins = _random_case(seed, mode)
    # a fleet cut in pieces by an unavailable gateway is issue 10's item 9 (reachability in every
    # method, another branch's): ffd and typepack do not respect it yet
    assume(_connected(spec))
    opt = oracle_solve(layers, spec, mode=mode, concurrency=concurrency, pins=pins)
    model = model_from_dict({"name": "m", "layers": layers})
    inst = make_instance(model, fleet_from_dict(spec), Workload(concurrency=concurrency, context_tokens=1),
                         mode=mode, pins=[f"{i}={d}" for i, d in pins.items()])
    for method in PLACING_METHODS:
        if mode not in MODES_OF[method]:
            continue
        opts = {"time_limit": 10, "threads": 1, "seed": 0, "objective": "lex"} if method == "cpsat" else {}
        r = place(inst, method, **opts)
        _check(method, r, opt, mode)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**9), st.sampled_from(["contiguous", "free"]))
def test_attention_per_stage_against_the_oracle(seed, mode):
    layers, spec, concurrency, pins = _random_case(seed, mode)
    assume(_connected(spec))
    opt = oracle_solve(layers, spec, mode=mode, concurrency=concurrency, pins=pins, attention_per_stage=True)
    model = model_from_dict({"name": "m", "layers": layers})
    inst = make_instance(model, fleet_from_dict(spec), Workload(concurrency=concurrency, context_tokens=1),
                         mode=mode, pins=[f"{i}={d}" for i, d in pins.items()], require=("attention-per-stage",))
    r = place(inst, "cpsat", time_limit=10, threads=1, seed=0, objective="lex")
    _check("cpsat", r, opt, mode)
    if r.feasible:
        held = {r.assignment[i] for i, x in enumerate(layers) if x["kind"] == "attention"}
        assert set(r.assignment) <= held
    for method in PLACING_METHODS:
        if method == "cpsat" or mode not in MODES_OF[method]:
            continue
        h = place(inst, method)
        if h.feasible:
            held = {h.assignment[i] for i, x in enumerate(layers) if x["kind"] == "attention"}
            assert set(h.assignment) <= held, method
