"""CP-SAT placement against independent oracles: brute force, the chain DP, pins (the known-optimum
battery, run by every exact method, is tests/algorithms/test_exact_battery.py)."""

from __future__ import annotations

import itertools
import math
import random

import pytest
from algo_instances import brute_bin_packing, brute_min_stages, chain_model, fleet, instance
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placer.algorithms import place
from placer.problem.instance import Instance, Pin, make_instance
from placer.problem.placement import Status
from placer.specs.fleet import fleet_from_dict
from placer.specs.model import Layer, LayerGraph
from placer.specs.workload import Workload


def cpsat(inst, **options):
    """CP-SAT through place(), which owns the guards every method relies on."""
    return place(inst, "cpsat", **options)


FAST = dict(time_limit=20.0, threads=2, seed=0)


# ----------------------------------------------------------------------------------------- oracles
def _cost(inst, a, b):
    return inst.link_us.get((a, b), inst.latency_us[a][b])


def _order_ok(inst, assignment, order):
    """Every edge goes forward (or stays) along ``order`` and consecutive stages are linked."""
    rank = {d: k for k, d in enumerate(order)}
    if any(rank[assignment[u]] > rank[assignment[v]] for u, v in inst.edges):
        return False
    return all((a, b) in inst.link_us for a, b in zip(order, order[1:]))


def brute_contiguous(inst: Instance, bottleneck: bool = False):
    """Lexicographic (devices, hop latency[, largest weight bytes on a device]) optimum over every
    assignment and stage order."""
    n, D = inst.n_nodes, inst.n_devices
    best = None
    for assignment in itertools.product(range(D), repeat=n):
        if not _fits(inst, assignment):
            continue
        used = sorted(set(assignment))
        ok = any(_order_ok(inst, assignment, order) for order in itertools.permutations(used))
        if not ok:
            continue
        lat = sum(_cost(inst, assignment[u], assignment[v]) for u, v in inst.edges
                  if assignment[u] != assignment[v])
        key = (len(used), lat)
        if bottleneck:
            key += (max(sum(inst.weight_bytes[i] for i in range(n) if assignment[i] == d) for d in used),)
        if best is None or key < best:
            best = key
    return best


def brute_free(inst: Instance):
    n, D = inst.n_nodes, inst.n_devices
    best = None
    for assignment in itertools.product(range(D), repeat=n):
        if not _fits(inst, assignment):
            continue
        lat = 0.0
        for u, v in inst.edges:
            a, b = assignment[u], assignment[v]
            if a != b:
                lat += _cost(inst, a, b)
        if math.isinf(lat):
            continue
        key = (len(set(assignment)), lat)
        if best is None or key < best:
            best = key
    return best


def _fits(inst, assignment):
    load = [0] * inst.n_devices
    for node, d in enumerate(assignment):
        load[d] += inst.demand_bytes[node]
    if any(load[d] > inst.capacity_bytes[d] for d in range(inst.n_devices)):
        return False
    for pin in inst.pins:
        on = {assignment[i] for i in pin.nodes}
        if len(on) > 1 or (pin.device is not None and inst.devices[on.pop()].id != pin.device):
            return False
    return True


def random_fleet(rng, n_dev, caps):
    """``n_dev`` single-device racks of random capacities joined in a line, plus random extra links."""
    types = {f"t{c}": {"memory": c} for c in sorted(set(caps))}
    groups = [{"device": f"t{c}", "racks": 1, "per_rack": 1} for c in caps]
    ids = [f"r{k}w0" for k in range(n_dev)]
    extra = []
    for a, b in itertools.combinations(ids, 2):
        if rng.random() < 0.4:
            extra.append({"a": a, "b": b, "latency_us": rng.choice([1, 2, 5])})
    spec = {"name": "rnd", "device_types": types,
            "fleet": {"groups": groups, "inter_rack_topology": "line", "inter_rack_latency_us": rng.choice([1, 3]),
                      "extra_links": extra}}
    return fleet_from_dict(spec)


# ----------------------------------------------------------------------------------------- chains
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 12), min_size=1, max_size=9), st.integers(12, 30), st.integers(1, 3))
def test_identical_chain_equals_brute_force_and_dp(weights, cap, per_rack):
    """Contiguous chains on identical devices: CP-SAT's device count is brute force's, equals the
    exact DP and is at most greedy's; the result is proven."""
    from placer.algorithms.dp import dp
    from placer.algorithms.greedy import greedy

    racks = -(-len(weights) // per_rack)
    inst = instance(weights, cap, racks=racks, per_rack=per_rack)
    r = cpsat(inst, **FAST)
    want = brute_min_stages(weights, cap)
    assert r.devices_used == want
    assert r.proven_optimal and r.status == Status.OPTIMAL
    assert r.devices_used == dp(inst).devices_used
    g = greedy(inst)
    if g.assignment is not None:
        assert r.devices_used <= g.devices_used
    # hop latency: (stages - 1) hops, each 2 us inside a rack, 3 us between racks, racks filled first
    full, rest = divmod(want, per_rack)
    racks_used = full + (1 if rest else 0)
    assert r.hop_latency_us == 2 * (want - racks_used) + 3 * (racks_used - 1)


def test_heterogeneous_small_fleets_match_brute_force():
    """Random tiny fleets (different capacities, random links and latencies): CP-SAT's (devices,
    hop latency) is the brute-force optimum in contiguous mode, and it says so."""
    rng = random.Random(3)
    checked = 0
    for _ in range(14):
        n_dev = rng.randint(2, 4)
        caps = [rng.choice([10, 16, 25]) for _ in range(n_dev)]
        weights = [rng.randint(2, 12) for _ in range(rng.randint(2, 5))]
        inst = make_instance(chain_model(weights), random_fleet(rng, n_dev, caps), Workload(concurrency=0))
        want = brute_contiguous(inst)
        r = cpsat(inst, **FAST)
        if want is None:
            assert r.status == Status.INFEASIBLE and r.message
            continue
        checked += 1
        assert r.status == Status.OPTIMAL, r.message
        assert (r.devices_used, r.hop_latency_us) == want
    assert checked >= 8


def test_free_mode_small_matches_brute_force():
    """Free mode on random tiny fleets: devices then shortest-path hop latency, as brute force."""
    rng = random.Random(5)
    for _ in range(8):
        n_dev = rng.randint(2, 4)
        caps = [rng.choice([10, 16, 25]) for _ in range(n_dev)]
        weights = [rng.randint(2, 12) for _ in range(rng.randint(2, 5))]
        inst = make_instance(chain_model(weights), random_fleet(rng, n_dev, caps), Workload(concurrency=0),
                             mode="free")
        want = brute_free(inst)
        r = cpsat(inst, **FAST)
        if want is None:
            assert r.status == Status.INFEASIBLE
            continue
        assert r.status == Status.OPTIMAL, r.message
        assert (r.devices_used, r.hop_latency_us) == want


def test_split_mode_shards_match_brute_force():
    """Split mode with shards:2 on a chain: contiguous placement of the refined chain, as brute force
    over the refined instance."""
    model = chain_model([10, 14, 6])
    fl = fleet(13, racks=1, per_rack=4)
    inst = make_instance(model, fl, Workload(concurrency=0), mode="split", granularity="shards:2")
    assert inst.n_nodes == 6
    r = cpsat(inst, **FAST)
    assert (r.devices_used, r.hop_latency_us) == brute_contiguous(inst)
    assert r.proven_optimal


def _dag_instance(weights, edges, fl, mode="split"):
    layers = tuple(Layer(name=f"n{i}", kind="linear_attention", index=i, weight_bytes_fixed=w,
                         state_bytes_per_request_fixed=1) for i, w in enumerate(weights))
    model = LayerGraph(name="dag", layers=layers, edges=tuple(edges))
    return Instance(model, fl, Workload(concurrency=0), mode)


def test_dag_contiguous_matches_brute_force():
    """A block-like DAG (one node fans out to three parallel nodes that join again) placed with
    monotone stages along its edges: CP-SAT equals brute force over assignments and stage orders."""
    weights = [6, 4, 4, 4, 6]
    edges = [(0, 1), (0, 2), (0, 3), (1, 4), (2, 4), (3, 4)]
    for cap, per_rack in [(10, 3), (14, 2), (24, 3)]:
        fl = fleet(cap, racks=2, per_rack=per_rack)
        inst = _dag_instance(weights, edges, fl)
        want = brute_contiguous(inst)
        r = cpsat(inst, **FAST)
        assert r.status == Status.OPTIMAL, r.message
        assert (r.devices_used, r.hop_latency_us) == want


# ----------------------------------------------------------------------------------------- pins
def test_pins_are_honoured_and_cost_what_they_must():
    """Node 0 pinned to the last device and nodes 2-3 to one device: the placement obeys both."""
    weights = [5, 5, 5, 5, 5, 5]
    fl = fleet(10, racks=2, per_rack=3)
    pins = (Pin((0,), "r1w2"), Pin((2, 3), None))
    for mode in ("contiguous", "free"):
        inst = make_instance(chain_model(weights), fl, Workload(concurrency=0), mode=mode, pins=pins)
        r = cpsat(inst, **FAST)
        assert r.status == Status.OPTIMAL, r.message
        dev = [inst.devices[d].id for d in r.assignment]
        assert dev[0] == "r1w2" and dev[2] == dev[3]
        oracle = brute_free if mode == "free" else brute_contiguous
        assert (r.devices_used, r.hop_latency_us) == oracle(inst)


def test_pin_forcing_an_unlinked_pair_is_infeasible_with_a_reason():
    """Two full-device nodes pinned to two devices that share no link: no contiguous pipeline exists;
    CP-SAT proves it and blames the pins."""
    fl = fleet(10, racks=3, per_rack=1, topology="line")     # r0 - r1 - r2, r0 and r2 not linked
    inst = make_instance(chain_model([10, 10]), fl, Workload(concurrency=0),
                         pins=(Pin((0,), "r0w0"), Pin((1,), "r2w0")))
    r = cpsat(inst, **FAST)
    assert r.status == Status.INFEASIBLE
    assert "r0w0" in r.message and "r2w0" in r.message


# ----------------------------------------------------------------------------------------- fleet views
def test_fleet_views_agree_with_their_definitions():
    """Twin classes from link-matrix rows equal the neighbour-set definition, and the latency
    hierarchy reproduces every hop cost as a sum of level steps."""
    from placer.algorithms.cpsat.fleet import FleetView, twin_classes

    rng = random.Random(9)
    for k in range(12):
        if k % 3 == 0:
            fl = fleet(None, groups=[(10, 2, 3), (20, 1, 2)], intra=rng.choice([1, 2]), inter=3)
        else:
            n_dev = rng.randint(2, 6)
            fl = random_fleet(rng, n_dev, [rng.choice([10, 20]) for _ in range(n_dev)])
        inst = make_instance(chain_model([1, 1]), fl, Workload(concurrency=0))
        view = FleetView(inst)
        assert view.twins == twin_classes(inst)
        levels = view.hierarchy
        D = inst.n_devices
        if levels is None:
            continue
        for a in range(D):
            for b in range(D):
                want = 0 if a == b else _cost(inst, a, b)
                got = sum(step for step, lab in levels if lab[a] != lab[b] and step is not None)
                assert got == pytest.approx(want * view.scale), (a, b)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 10), min_size=1, max_size=9), st.integers(10, 16))
def test_free_device_count_equals_brute_force_bin_packing(sizes, cap):
    inst = instance(sizes, cap, mode="free")
    r = cpsat(inst, objective="devices", **FAST)
    assert r.devices_used == brute_bin_packing(sizes, cap)
    assert r.proven_optimal


def test_a_hint_from_another_method_is_used_and_the_answer_unchanged():
    """A greedy placement passed as ``hint`` starts the search; the proven optimum is the same."""
    from placer.algorithms.greedy import greedy

    weights = [5, 7, 3, 8, 2, 6]
    fl = fleet(None, groups=[(10, 2, 1), (13, 1, 3)])
    inst = make_instance(chain_model(weights), fl, Workload(concurrency=0))
    g = greedy(inst)
    assert g.assignment is not None
    plain = cpsat(inst, **FAST)
    hinted = cpsat(inst, hint=g, **FAST)
    assert hinted.proven_optimal and plain.proven_optimal
    assert (hinted.devices_used, hinted.hop_latency_us) == (plain.devices_used, plain.hop_latency_us)
    assert (plain.devices_used, plain.hop_latency_us) == brute_contiguous(inst)


@pytest.mark.slow
def test_third_level_bottleneck_matches_brute_force():
    """objective="lex3": devices, then hop latency, then the largest weight bytes on one device."""
    for weights, groups in [([5, 7, 3, 8, 2, 6], [(10, 2, 2), (13, 1, 2)]), ([4, 4, 4, 4, 4], [(9, 1, 4)])]:
        inst = make_instance(chain_model(weights), fleet(None, groups=groups), Workload(concurrency=0))
        r = cpsat(inst, objective="lex3", **FAST)
        assert r.proven_optimal and r.level("bottleneck").proven
        got = (r.devices_used, r.hop_latency_us, r.level("bottleneck").value)
        assert got == brute_contiguous(inst, bottleneck=True)


def test_canonical_relabelling_keeps_cost_and_orders_interchangeable_racks():
    """Racks of identical devices are interchangeable subtrees: relabelling a placement so that racks
    (then devices inside a rack) are ordered by the first node they hold keeps the device count and
    the hop latency, and yields the order the model's symmetry breaking demands."""
    from placer.algorithms.cpsat.fleet import FleetView, symmetry_classes
    from placer.algorithms.cpsat.models import canonical_classes
    from placer.problem.placement import hops_of

    rng = random.Random(4)
    fl = fleet(None, groups=[(10, 3, 3), (20, 1, 3)])
    inst = make_instance(chain_model([1] * 12), fl, Workload(concurrency=0), mode="free")
    classes = symmetry_classes(FleetView(inst))
    assert sorted(len(c) for c in classes) == [3, 3, 3, 3, 3]   # 3 small racks; devices in each of 4 racks
    for _ in range(50):
        a = [rng.randrange(inst.n_devices) for _ in range(12)]
        b = canonical_classes(classes, a)
        assert len(set(b)) == len(set(a)) and hops_of(inst, b) == hops_of(inst, a)
        first = {}
        for node, d in enumerate(b):
            first.setdefault(d, node)
        for cls in classes:
            firsts = [min(first.get(d, 99) for d in g) for g in cls]
            assert firsts == sorted(firsts)


def test_a_hint_that_overflows_a_device_is_not_taken():
    """A user hint is checked in exact bytes before CP-SAT starts from it: all of [6, 6, 6] on one
    12-byte device does not fit, so the result is a real 2-device packing (not the hint)."""
    for mode in ("free", "contiguous"):
        inst = instance([6, 6, 6], 12, mode=mode)
        r = cpsat(inst, hint=[0, 0, 0], **FAST)
        assert r.devices_used == 2 and r.proven_optimal
