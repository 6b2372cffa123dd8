"""The exact chain DP: fewest stages and smallest bottleneck against brute force; kimi-k3; 100k nodes."""

from __future__ import annotations

import random
from itertools import combinations

import pytest
from algo_instances import brute_min_bottleneck, brute_min_stages, fleet, instance

from placer.algorithms import place
from placer.algorithms.chain import bottleneck_ends as min_bottleneck_ends
from placer.algorithms.chain import fixed_order_ends, next_fit_ends, prefix_sums
from placer.algorithms.dp import dp
from placer.problem.instance import make_instance
from placer.problem.placement import Level, Status, stages_of
from placer.specs.fleet import fleet_from_dict, load_fleet
from placer.specs.model import load_model, model_from_dict
from placer.specs.workload import Workload, workload_for


def _random_chains(count, seed, smallest=0):
    rng = random.Random(seed)
    for _ in range(count):
        n = rng.randint(1, 9)
        cap = rng.randint(10, 40)
        yield [rng.randint(smallest, cap) for _ in range(n)], cap


def test_next_fit_is_the_fewest_stages_and_bisection_the_smallest_bottleneck():
    """400 random chains: next-fit's stage count and the bisected bottleneck equal brute force."""
    for weights, cap in _random_chains(400, seed=1):
        prefix = prefix_sums(weights)
        ends = next_fit_ends(prefix, cap)
        want = brute_min_stages(weights, cap)
        assert len(ends) == want, (weights, cap)
        balanced = min_bottleneck_ends(prefix, cap, want)
        assert len(balanced) == want and balanced[-1] == len(weights)
        sums = [prefix[e] - prefix[s] for s, e in zip([0, *balanced], balanced)]
        assert max(sums) == brute_min_bottleneck(weights, cap, want), (weights, cap)


def _brute_fixed_order(weights, caps):
    """Fewest stages with stage k on device k (no device skipped), over every set of cuts."""
    n = len(weights)
    for k in range(n):
        for cuts in combinations(range(1, n), k):
            b = [0, *cuts, n]
            if len(b) - 1 <= len(caps) and \
                    all(sum(weights[x:y]) <= caps[s] for s, (x, y) in enumerate(zip(b, b[1:]))):
                return k + 1
    return None


def test_fixed_device_order_matches_brute_force():
    """Per-stage capacities (a fixed order of different devices): the exact reachable-ends DP."""
    rng = random.Random(7)
    for _ in range(300):
        n = rng.randint(1, 8)
        caps = [rng.randint(5, 30) for _ in range(rng.randint(1, n + 1))]
        weights = [rng.randint(0, 30) for _ in range(n)]
        got = fixed_order_ends(prefix_sums(weights), caps)
        want = _brute_fixed_order(weights, caps)
        assert (None if got is None else len(got)) == want, (weights, caps)
        if got is not None:
            b = [0, *got]
            assert all(sum(weights[x:y]) <= caps[s] for s, (x, y) in enumerate(zip(b, b[1:])))
            balanced = min_bottleneck_ends(prefix_sums(weights), caps[:want], want)
            sums = [sum(weights[x:y]) for x, y in zip([0, *balanced], balanced)]
            assert len(balanced) == want
            assert all(v <= caps[s] for s, v in enumerate(sums))
            best = min(max(sum(weights[x:y]) for x, y in zip([0, *cuts, n], [*cuts, n]))
                       for cuts in combinations(range(1, n), want - 1)
                       if all(sum(weights[x:y]) <= caps[s]
                              for s, (x, y) in enumerate(zip([0, *cuts, n], [*cuts, n]))))
            assert max(sums) == best, (weights, caps)


def test_next_fit_is_not_exact_along_a_fixed_order():
    """[16, 9, 22, 6] on devices 26, 20, 22, 17: next-fit packs 16 + 9 and then 22 fits no 20-byte
    device; one node per device works."""
    prefix = prefix_sums([16, 9, 22, 6])
    assert fixed_order_ends(prefix, [26, 20, 22, 17]) == [1, 2, 3, 4]


def test_dp_and_greedy_equal_brute_force_on_random_chains():
    """place(dp) and place(greedy) on whole instances (identical devices, one full rack)."""
    for weights, cap in _random_chains(60, seed=3, smallest=1):   # specs refuse zero-size layers
        inst = instance(weights, cap)
        want = brute_min_stages(weights, cap)
        d, g = place(inst, "dp"), place(inst, "greedy")
        assert d.devices_used == want and g.devices_used == want, (weights, cap)
        assert d.status == Status.OPTIMAL and d.proven_optimal
        assert g.status == Status.HEURISTIC and not g.proven_optimal
        assert d.lower_bound_devices <= want


def test_dp_balances_the_bottleneck():
    """[4, 4, 4, 4] on devices of 12: next-fit gives 12 + 4, the DP 8 + 8 with the same two devices."""
    inst = instance([4, 4, 4, 4], 12)
    r = place(inst, "dp")
    assert r.devices_used == 2
    assert [len(s.nodes) for s in stages_of(inst, r.assignment)] == [2, 2]
    assert r.stats["bottleneck_bytes"] == 8


def test_kimi_k3_contiguous_needs_70_wafers():
    """Each wafer holds two KDA layers or one MLA layer: (K K | K | M) x 23 + M = 23 x 3 + 1 = 70.
    Racks of 3 wafers: 24 racks, 23 inter-rack hops at 3 us and 46 intra-rack hops at 2 us."""
    m = load_model("kimi-k3")
    inst = make_instance(m, load_fleet("wse-3t"), workload_for(m))
    r = place(inst, "dp")
    assert r.status == Status.OPTIMAL and r.proven_optimal
    assert r.devices_used == 70 and r.hops == 69
    assert r.hop_latency_us == 23 * 3 + 46 * 2
    assert r.level("latency") == Level("latency", 161.0, 161.0, True)
    assert r.order is not None and list(r.order) == list(dict.fromkeys(r.assignment))
    kinds = [[inst.nodes[i].mixer for i in s.nodes] for s in stages_of(inst, r.assignment)]
    assert all(k in (["kda", "kda"], ["kda"], ["mla"]) for k in kinds)
    assert kinds.count(["mla"]) == 24
    assert r.concurrency_ceiling == 184


def test_dp_on_different_devices_takes_the_best_order_and_proves_it():
    """Two 30-byte devices and four 10-byte ones, fully linked."""
    fl = fleet(None, groups=[(30, 1, 2), (10, 1, 4)])
    inst = instance([10, 10, 10, 10, 10, 10, 10], fleet_spec=fl)
    r = place(inst, "dp")
    # 30 + 30 on the large devices, the last 10 on a small one: 3 devices = the volume bound
    assert r.devices_used == 3 and r.lower_bound_devices == 3
    assert r.status == Status.OPTIMAL and r.devices_proven and r.level("devices").proven
    # the stages are laid on a path found for the count, not by a latency search: that level is not proven
    assert not r.level("latency").proven and r.level("latency").bound is None
    # [10, 25, 10, 10, 10]: along the fixed order 30, 30, 10, ... next-fit needs 5 devices
    # ([10] [25] [10] [10] [10]); a small device first needs 3 (10 | 25 | 30), and no 2 devices
    # hold 65 B: dp takes the order-free optimum and proves the count
    inst = instance([10, 25, 10, 10, 10], fleet_spec=fl)
    r = place(inst, "dp")
    assert r.devices_used == 3 and r.lower_bound_devices == 3
    assert r.status == Status.OPTIMAL and r.proven_optimal and r.level("devices") == Level("devices", 3, 3, True)
    assert [inst.capacity_bytes[d] for d in dict.fromkeys(r.assignment)] == [10, 30, 30]


def test_dp_reports_infeasible_when_no_path_of_enough_devices_exists():
    """Three racks of two on a line (only slot 0 links racks): the longest simple path has 5 devices
    (r0w1 r0w0 r1w0 r2w0 r2w1), so a chain needing 6 stages cannot run although 6 devices exist."""
    fl = fleet(10, racks=3, per_rack=2, topology="line")
    inst = instance([10] * 6, fleet_spec=fl)
    r = place(inst, "dp")
    assert r.status == Status.INFEASIBLE and "simple path of 6" in r.message
    inst5 = instance([10] * 5, fleet_spec=fl)
    r5 = place(inst5, "dp")
    assert r5.devices_used == 5 and r5.status == Status.OPTIMAL


@pytest.fixture(scope="module")
def long_chain():
    """100,002 nodes (A A B) x 33,334 with A = 30 B and B = 40 B; devices of 100,020 B hold exactly
    1,000 periods (100,000 B; one more A would need 100,030 B): ceil(33,334 / 1,000) = 34 stages."""
    spec = {"name": "long", "hidden_size": 8,
            "mixers": {"k": {"type": "kda", "num_heads": 1, "head_dim": 8}},
            "layer_types": {"A": {"mixer": "k", "params": 30}, "B": {"mixer": "k", "params": 40}},
            "pattern": "(A A B)*33334"}
    model = model_from_dict(spec)
    wl = Workload(concurrency=0, weight_bits=8)
    activation = 2 * 8 * 2   # one input and one output bf16 activation of width 8
    fl = fleet(100_020 + activation, racks=12, per_rack=3)
    return make_instance(model, fl, wl)


@pytest.mark.slow
def test_dp_places_a_100k_node_chain(long_chain):
    assert long_chain.n_nodes == 100_002 and long_chain.capacity_bytes[0] == 100_020
    r = place(long_chain, "dp")
    assert r.status == Status.OPTIMAL and r.devices_used == 34
    total = 33_334 * 100
    # balanced: no stage above next-fit's 100,000 B, none below the average
    assert -(-total // 34) <= r.stats["bottleneck_bytes"] < 100_000
    loads = [sum(long_chain.demand_bytes[i] for i in s.nodes) for s in stages_of(long_chain, r.assignment)]
    assert max(loads) == r.stats["bottleneck_bytes"] and sum(loads) == total


def _mixed_line(memories, topology):
    spec = {"name": "hw", "device_types": {f"t{k}": {"memory": m} for k, m in enumerate(memories)},
            "fleet": {"intra_rack_latency_us": 1, "inter_rack_latency_us": 2, "inter_rack_topology": topology,
                      "groups": [{"device": f"t{k}", "racks": 1, "per_rack": 1} for k in range(len(memories))]}}
    return spec


MIXED_CHAIN = [35, 38, 65, 85]


def _mixed_instance(spec, weights=MIXED_CHAIN):
    layers = [{"kind": "linear_attention", "weight_bytes": w, "state_bytes_per_request": 1} for w in weights]
    return layers, make_instance(model_from_dict({"name": "m", "layers": layers}), fleet_from_dict(spec),
                                 Workload(concurrency=0), mode="contiguous")


@pytest.mark.parametrize("topology", ["full", "line"])
def test_dp_on_mixed_devices_where_the_fixed_order_does_not_fit(topology):
    """Devices of 40, 40, 70, 90 B (a line in that order, or fully linked); chain 35, 38, 65, 85 B.
    The fixed order dp used to take (largest first: 90, 70, 40, 40) places nothing: 35 + 38 on the
    90, 65 on the 70, then 85 fits no 40. By hand, three devices cannot work (85 needs the 90, 65
    the 70 or the 90, and 35 + 38 = 73 then fits neither 40), and 40, 40, 70, 90 in that order
    holds one node each: 4 devices, a path on both fleets. The oracle agrees; dp now proves it."""
    from oracle import solve as oracle_solve

    spec = _mixed_line([40, 40, 70, 90], topology)
    layers, inst = _mixed_instance(spec)
    assert fixed_order_ends(prefix_sums(MIXED_CHAIN), [90, 70, 40, 40]) is None
    opt = oracle_solve(layers, spec, mode="contiguous")
    assert opt.devices == 4
    r = place(inst, "dp")
    assert r.status == Status.OPTIMAL and r.proven_optimal and r.devices_used == 4 and r.lower_bound_devices == 4
    assert [inst.capacity_bytes[d] for d in r.assignment] == [40, 40, 70, 90]


def test_dp_on_mixed_devices_claims_nothing_it_cannot_show():
    """The same chain on a line 40 - 90 - 40 - 70: the four devices exist, but not as a path in the
    order 40, 40, 70, 90 (the two 40s are not neighbours), and by the oracle no placement exists at
    all. dp cannot search every path and cut, so it answers unknown (not infeasible, not a placement),
    with the order-free bound of 4 devices."""
    from oracle import solve as oracle_solve

    spec = _mixed_line([40, 90, 40, 70], "line")
    layers, inst = _mixed_instance(spec)
    assert oracle_solve(layers, spec, mode="contiguous").devices is None
    r = place(inst, "dp")
    assert r.status == Status.UNKNOWN and r.assignment is None and not r.proven_optimal
    assert r.lower_bound_devices == 4 and "at least 4 devices in any order" in r.message


def test_dp_says_infeasible_when_no_cover_fits_in_any_order():
    """85 B and 86 B both need the one 90 B device: no cover exists, whatever the order."""
    from oracle import solve as oracle_solve

    spec = _mixed_line([40, 90, 70], "full")
    layers, inst = _mixed_instance(spec, [85, 86])
    assert oracle_solve(layers, spec, mode="contiguous").devices is None
    r = dp(inst)
    assert r.status == Status.INFEASIBLE and r.assignment is None
