"""placer.algorithms.pathbound: the walk relaxation of simple device paths, by hand and against the
brute-force oracle (tests/oracle.py) on random sparse fleets, alone and through CP-SAT."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import fleet_devices
from oracle import solve as oracle_solve

from placer.algorithms import place
from placer.algorithms.chain import chain_min_devices
from placer.algorithms.pathbound import path_relaxation
from placer.problem.instance import make_instance
from placer.specs.fleet import fleet_from_dict
from placer.specs.model import model_from_dict
from placer.specs.workload import Workload


def _line(memories, topology="line", chords=()):
    return {"name": "hw", "device_types": {f"t{k}": {"memory": m} for k, m in enumerate(memories)},
            "fleet": {"intra_rack_latency_us": 1, "inter_rack_latency_us": 2, "inter_rack_topology": topology,
                      "groups": [{"device": f"t{k}", "racks": 1, "per_rack": 1} for k in range(len(memories))],
                      "extra_links": [{"a": f"r{a}w0", "b": f"r{b}w0", "latency_us": 3} for a, b in chords]}}


def _instance(weights, spec):
    layers = [{"kind": "linear_attention", "weight_bytes": w, "state_bytes_per_request": 1} for w in weights]
    inst = make_instance(model_from_dict({"name": "m", "layers": layers}), fleet_from_dict(spec),
                         Workload(concurrency=0), mode="contiguous")
    return layers, inst


def _check_path(inst, got):
    """The returned path is a contiguous placement: distinct, directly linked devices, stages that
    fit, every node covered in order."""
    order, ends = got.order, got.ends
    assert len(set(order)) == len(order)
    assert all((a, b) in inst.link_us for a, b in zip(order, order[1:]))
    assert ends[-1] == inst.n_nodes and all(a < b for a, b in zip([0, *ends], ends))
    for d, a, b in zip(order, [0, *ends], ends):
        assert sum(inst.demand_bytes[a:b]) <= inst.capacity_bytes[d]


def test_the_path_bound_sees_what_the_order_free_bound_cannot():
    """A line 15 B - 5 B - 15 B, chain 10, 5, 10 B. In any order two devices suffice (10 + 5 on
    one 15, 10 on the other), but the two 15 B devices are not linked: on the line, two devices
    are 15 + 5, which cannot hold 25 B as two stages (10 + 5 > 5, 5 + 10 > 5). Three are needed
    (10 | 5 | 10 along the line), and the walk relaxation proves it."""
    spec = _line([15, 5, 15])
    layers, inst = _instance([10, 5, 10], spec)
    assert chain_min_devices(inst.demand_bytes, [(15, 2), (5, 1)])[0] == 2
    assert oracle_solve(layers, spec, mode="contiguous").devices == 3
    got = path_relaxation(inst.demand_bytes, inst.capacity_bytes, inst.link_us)
    assert got.bound == 3 and got.order is not None and len(got.order) == 3
    _check_path(inst, got)
    r = place(inst, "cpsat", time_limit=10, threads=1, seed=0, objective="devices")
    assert r.devices_used == 3 and r.devices_proven


def _random_sparse(seed: int):
    rng = random.Random(seed)
    n_dev = rng.randint(3, 6)
    memories = [rng.choice([10, 14, 20]) for _ in range(n_dev)]
    chords = []
    if n_dev > 3:
        for _ in range(rng.randint(0, 2)):
            a = rng.randrange(n_dev)
            b = (a + rng.randint(2, n_dev - 2)) % n_dev
            if (a, b) not in chords and (b, a) not in chords:
                chords.append((a, b))
    spec = _line(memories, rng.choice(["line", "ring"]), chords)
    weights = [rng.randint(2, 12) for _ in range(rng.randint(2, 5))]
    return weights, spec


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**9))
def test_the_path_bound_never_exceeds_the_oracle(seed):
    weights, spec = _random_sparse(seed)
    layers, inst = _instance(weights, spec)
    alive, _, _ = fleet_devices(spec)
    opt = oracle_solve(layers, spec, mode="contiguous")
    got = path_relaxation(inst.demand_bytes, inst.capacity_bytes, inst.link_us)
    if opt.devices is None:
        assert got.order is None            # no path exists, so none may be returned
        return
    assert got.bound is not None and got.bound <= opt.devices
    if got.order is not None:
        _check_path(inst, got)
        assert len(got.order) >= opt.devices
        assert len(alive) == inst.n_devices


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**9))
def test_cpsat_on_sparse_fleets_claims_only_what_the_oracle_confirms(seed):
    weights, spec = _random_sparse(seed)
    layers, inst = _instance(weights, spec)
    opt = oracle_solve(layers, spec, mode="contiguous")
    r = place(inst, "cpsat", time_limit=10, threads=1, seed=0, objective="devices")
    if opt.devices is None:
        assert not r.feasible
        return
    assert r.lower_bound_devices is None or r.lower_bound_devices <= opt.devices
    if r.feasible:
        assert r.devices_used >= opt.devices
        if r.devices_proven:
            assert r.devices_used == opt.devices
