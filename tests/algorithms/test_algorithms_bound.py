"""Lower bounds: hand-computed values, kimi-k3, and never above an optimum found by brute force."""

from __future__ import annotations

import random

from algo_instances import brute_bin_packing, brute_min_stages, fleet, instance

from placer.algorithms import place
from placer.algorithms.bound import bounds, dual_feasible_bound, lower_bound, martello_toth_l2, volume_bound
from placer.problem.instance import make_instance
from placer.specs.fleet import load_fleet
from placer.specs.model import load_model
from placer.specs.workload import workload_for


def test_volume_bound_uses_the_largest_devices_first():
    # 15 bytes: 10 + 6 = 16 covers it with two devices
    assert volume_bound([5, 5, 5], [6, 10, 6]) == 2
    # 23 bytes do not fit 10 + 6 + 6 = 22: more than the fleet
    assert volume_bound([8, 8, 7], [6, 10, 6]) == 4


def test_martello_toth_counts_items_above_half_a_device():
    # three items of 6 on devices of 10: volume says 2, no two share a device
    assert volume_bound([6, 6, 6], [10, 10, 10]) == 2
    assert martello_toth_l2([6, 6, 6], 10) == 3
    # k = 4: items above 10 - 4 = 6 (the 7s) block their devices; the 4s need ceil(12 / 10) more
    assert martello_toth_l2([7, 7, 4, 4, 4], 10) == 4


def test_dual_feasible_functions_count_items_that_fit_two_per_device():
    # items of 4 on devices of 10: at most two per device (3 x 4 = 12), u^(2) counts each as 1/2
    assert dual_feasible_bound([4] * 5, 10) == 3
    assert volume_bound([4] * 5, [10] * 5) == 2


def test_kimi_k3_bounds_by_mode():
    """Free mode: 24 MLA layers fill a wafer each, KDA layers fit two per wafer: 24 + ceil(69 / 2)
    = 59 (the dual feasible function with k = 2). Contiguous: the exact chain count, 70. The
    volume bound alone: 2,221.9 GB over 44 GB wafers = 51."""
    m = load_model("kimi-k3")
    fl, wl = load_fleet("wse-3t"), workload_for(m)
    free = bounds(make_instance(m, fl, wl, mode="free"))
    assert free == {"volume": 51, "martello_toth_l2": 51, "dual_feasible": 59}
    contiguous = bounds(make_instance(m, fl, wl))
    assert contiguous["chain"] == 70 and lower_bound(make_instance(m, fl, wl)) == 70


def test_a_node_larger_than_every_device_puts_the_bound_beyond_the_fleet():
    inst = instance([5, 50, 5], 10)
    assert lower_bound(inst) == inst.n_devices + 1


def test_bounds_never_exceed_brute_force_optima():
    """Free mode against exhaustive bin packing; contiguous against exhaustive cuts."""
    rng = random.Random(11)
    for _ in range(80):
        n = rng.randint(1, 7)
        cap = rng.randint(10, 30)
        weights = [rng.randint(1, cap) for _ in range(n)]
        free = instance(weights, cap, mode="free")
        assert lower_bound(free) <= brute_bin_packing(weights, cap), (weights, cap)
        chain = instance(weights, cap)
        assert lower_bound(chain) <= brute_min_stages(weights, cap)


def test_bound_is_at_most_every_method_count():
    rng = random.Random(5)
    for _ in range(25):
        n = rng.randint(2, 12)
        weights = [rng.randint(1, 40) for _ in range(n)]
        fl = fleet(None, groups=[(40, 2, 3), (60, 1, 2)])
        for mode, methods in (("free", ("ffd", "typepack")), ("contiguous", ("greedy", "dp"))):
            inst = instance(weights, mode=mode, fleet_spec=fl)
            lb = lower_bound(inst)
            for m in methods:
                r = place(inst, m)
                if r.feasible:
                    assert lb <= r.devices_used, (weights, mode, m)
                    if m == "dp":
                        # dp adds the order-free fewest devices of the chain (a bound in any order)
                        assert lb <= r.lower_bound_devices <= r.devices_used
                    else:
                        assert r.lower_bound_devices == lb


def test_bound_method_reports_the_bound_alone():
    m = load_model("kimi-k3")
    r = place(make_instance(m, load_fleet("wse-3t"), workload_for(m), mode="free"), "bound")
    assert r.assignment is None and r.lower_bound_devices == 59
    assert r.stats["bounds"]["dual_feasible"] == 59
