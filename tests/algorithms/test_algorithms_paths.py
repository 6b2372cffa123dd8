"""Device paths: exact rack filling, and the bounded search against brute force."""

from __future__ import annotations

import random
from itertools import permutations

from algo_instances import fleet, instance

from placer.algorithms.paths import find_path, min_latency_path, path_latency_us, rack_layout


def _brute(inst, s, fixed=None):
    best = None
    for p in permutations(range(inst.n_devices), s):
        if fixed and any(p[k] != d for k, d in fixed.items()):
            continue
        if all((a, b) in inst.link_us for a, b in zip(p, p[1:])):
            cost = path_latency_us(inst, p)
            best = cost if best is None else min(best, cost)
    return best


def test_rack_fill_is_exact_on_rack_fleets():
    """Racks of 3 (2 us inside, 3 us between): 7 devices use 3 racks: 4 intra hops + 2 inter hops."""
    inst = instance([1], 10, fleet_spec=fleet(10, racks=4, per_rack=3))
    assert rack_layout(inst) is not None
    r = find_path(inst, 7)
    assert r.proven and r.latency_us == 4 * 2 + 2 * 3
    assert len(set(r.path)) == 7
    small = instance([1], 10, fleet_spec=fleet(10, racks=2, per_rack=3))
    for s in range(1, 7):
        assert find_path(small, s).latency_us == (_brute(small, s) if s > 1 else 0.0)


def test_rack_fill_takes_the_largest_racks_first():
    """Racks of 1, 3 and 2 available devices (one of rack 2's three is down): 4 devices = rack 1 whole
    plus one more rack: 2 + 2 + 3 = 7 us."""
    fl = fleet(10, racks=3, per_rack=3, unavailable=["r0w1", "r0w2", "r2w2"])
    inst = instance([1], 10, fleet_spec=fl)
    path = min_latency_path(inst, 4)
    assert [inst.devices[d].rack for d in path[:3]] == [1, 1, 1]
    assert path_latency_us(inst, path) == 7


def test_search_matches_brute_force_on_random_graphs():
    """Single-device racks on a line plus random extra links with random latencies."""
    rng = random.Random(2)
    for _ in range(40):
        n = rng.randint(3, 6)
        extra = []
        for a in range(n):
            for b in range(a + 2, n):
                if rng.random() < 0.4:
                    extra.append((f"r{a}w0", f"r{b}w0", rng.randint(1, 9)))
        fl = fleet(10, racks=n, per_rack=1, topology="line", inter=rng.randint(1, 9), extra_links=extra)
        inst = instance([1], 10, fleet_spec=fl)
        for s in range(2, n + 1):
            want = _brute(inst, s)
            got = find_path(inst, s)
            assert got.proven
            assert got.latency_us == want and (got.path is None) == (want is None)
        fixed = {0: n - 1}
        got = find_path(inst, 2, fixed=fixed)
        assert got.latency_us == _brute(inst, 2, fixed)


def test_no_path_longer_than_the_fleet():
    inst = instance([1], 10, fleet_spec=fleet(10, racks=1, per_rack=2))
    r = find_path(inst, 3)
    assert r.path is None and r.proven
