"""CP-SAT numeric safety, honest status, interrupts, and the published kimi-k3 example."""

from __future__ import annotations

import pytest
from algo_instances import chain_model, fleet, instance

from placer.algorithms import ortools_adapter as ora
from placer.algorithms import place
from placer.algorithms.quantize import ROW_LIMIT, check_row, choose_unit, rounding_is_harmless
from placer.problem.instance import Pin, make_instance
from placer.problem.placement import Status
from placer.specs.errors import SolverLimitError
from placer.specs.fleet import load_fleet
from placer.specs.model import load_model
from placer.specs.workload import Workload, workload_for

GB = 10**9

def cpsat(inst, **options):
    """CP-SAT through place(), which owns the guards every method relies on."""
    return place(inst, "cpsat", **options)


# ----------------------------------------------------------------------------------------- units
def test_gcd_unit_when_rows_stay_small():
    """Sizes 6,10 and capacity 30 share the divisor 2: exact unit 2, no rounding."""
    q = choose_unit([6, 10, 6], [30, 30])
    assert q.unit == 2 and q.exact and q.demand == (3, 5, 3) and q.capacity == (15, 15)
    assert not q.rounding_may_cost_device


def test_large_rows_get_the_finest_power_of_two_unit():
    """200 layers of 16 GB: the raw row sums to 3.2e12 bytes, far above 2^31. The unit is the
    smallest power of two that brings the row below 2^31, rounding demands up and capacity down."""
    demand = [16 * GB + 7] * 200
    q = choose_unit(demand, [44 * GB])
    assert q.unit & (q.unit - 1) == 0 and not q.exact
    assert q.row_sum <= ROW_LIMIT
    # the next finer power of two would overflow the row
    finer = q.unit // 2
    assert sum(-(-d // finer) for d in demand) + 44 * GB // finer > ROW_LIMIT
    assert all(qd * q.unit >= d for qd, d in zip(q.demand, demand))
    assert q.capacity[0] * q.unit <= 44 * GB
    assert q.harmless   # two 16 GB layers leave 12 GB: rounding by a few KiB cannot matter


def test_harmful_rounding_is_detected():
    """Two items of 5 units + 1 byte fill a capacity of 10 units + 2 bytes exactly; rounded, they
    need 12 units and the capacity holds 10: rounding would cost a device, and the check says so."""
    unit = 1024
    assert rounding_is_harmless([5 * unit + 1, 5 * unit + 1], [10 * unit + 2], unit) is False
    assert rounding_is_harmless([5 * unit, 5 * unit], [10 * unit + 2], unit) is True


def test_row_check_refuses_sums_beyond_2_31():
    with pytest.raises(SolverLimitError, match="5293"):
        check_row(2**31, "capacity row")
    check_row(ROW_LIMIT, "capacity row")


def test_workaround_parameter_is_always_set():
    p = ora.parameters(time_limit=1, seed=3, threads=2)
    assert p["presolve_inclusion_work_limit"] == 0
    assert p["random_seed"] == 3 and p["num_workers"] == 2 and p["max_time_in_seconds"] == 1.0
    assert p["relative_gap_limit"] == 0 and p["absolute_gap_limit"] == 0


def test_16_gb_layers_on_a_heterogeneous_fleet_solve_exactly():
    """Raw byte rows would wrap CP-SAT 9.15's 32-bit presolve sum (google/or-tools#5293): 24 layers
    of 16-17 GB on 44 GB and 64 GB devices. The quantized model's answer equals the exact answer:
    the fewest devices is the brute-force minimum over device orders, and the placement holds in
    bytes (the method's own exact check runs before it returns)."""
    weights = [16 * GB + 123_457 * (i % 5) for i in range(24)]
    fl = fleet(None, groups=[(44 * GB, 2, 4), (64 * GB, 1, 4)])
    inst = make_instance(chain_model(weights), fl, Workload(concurrency=0))
    assert sum(inst.demand_bytes) > 2**31
    r = cpsat(inst, time_limit=30, objective="devices")
    assert r.stats["unit_bytes"] > 1
    assert r.proven_optimal
    # 64 GB devices hold 3 layers, 44 GB devices 2: four 64 GB devices (12 layers) + six 44 GB (12)
    assert r.devices_used == 10
    assert not r.stats["rounding_may_cost_device"]


def test_16_gb_chain_on_identical_devices_matches_next_fit():
    """60 layers of 16 GB, two per 44 GB device: 30 stages; 30 devices in racks of 3 cross 9 rack
    boundaries: 20 x 2 us + 9 x 3 us = 67 us."""
    weights = [16 * GB + 1] * 60
    inst = instance(weights, 44 * GB, racks=12, per_rack=3)
    r = cpsat(inst, time_limit=30)
    assert r.devices_used == 30 and r.hop_latency_us == 67
    assert r.proven_optimal


# ----------------------------------------------------------------------------------------- honesty
def test_time_limited_solve_is_not_called_optimal():
    """Falkenauer-style triplets (36 items filling 12 bins exactly) with one pin, which forces the
    per-node model; with a 0.5 s limit the search may not close, and then the result says so: a
    placement, FEASIBLE, not proven, with the arc-flow bound of 12 and the gap."""
    import random
    rng = random.Random(11)
    sizes = []
    for _ in range(12):
        a = rng.randint(380, 490)
        b = rng.randint(max(250, 500 - a), 750 - a)
        sizes += [a, b, 1000 - a - b]
    rng.shuffle(sizes)
    model = chain_model(sizes)
    fl = fleet(1000, racks=1, per_rack=16)
    inst = make_instance(model, fl, Workload(concurrency=0), mode="free", pins=(Pin((0,), "r0w5"),))
    r = cpsat(inst, time_limit=0.5, objective="devices")
    assert r.assignment is not None and r.bound == 12
    if r.devices_used > 12:
        assert r.status == Status.FEASIBLE and not r.proven_optimal
        assert r.gap == pytest.approx((r.devices_used - 12) / r.devices_used)
    else:
        assert r.proven_optimal


def test_kimi_free_latency_is_proven_from_its_bound():
    """Free mode: the device count (59) and the hop latency are both proven, the latter by the
    rack-run bound: 160 us = 69 device changes at 2 us plus 22 rack changes at 1 us more (a run
    of layers inside one rack packs into its three wafers, so holds at most one MLA layer). The
    unproven case is tests/algorithms/test_determinism.py's, cut by deterministic work."""
    inst = _kimi("free")
    r = cpsat(inst, time_limit=30)
    assert r.devices_used == 59 and r.level("devices").proven
    assert (r.level("latency").value, r.level("latency").bound, r.level("latency").proven) == (160, 160, True)
    assert r.status == Status.OPTIMAL and r.proven_optimal


def test_interrupt_returns_the_best_placement():
    """A KeyboardInterrupt raised while the search runs (here from the progress callback) stops the
    search; the best placement found so far comes back as FEASIBLE, not an exception."""
    calls = []

    def progress(info):
        calls.append(info)
        raise KeyboardInterrupt

    # a fleet whose cheapest path needs a search (links of several latencies, not an ultrametric)
    weights = [2, 3, 4, 2, 6, 2, 6, 9, 8, 8]
    extra = [("r0w0", "r1w1", 8), ("r1w0", "r0w1", 6), ("r1w0", "r2w1", 3), ("r2w0", "r0w1", 5)]
    fl = fleet(None, groups=[(10, 2, 2), (13, 1, 2)], extra_links=extra, inter=5)
    inst = make_instance(chain_model(weights), fl, Workload(concurrency=0))
    r = cpsat(inst, time_limit=20, progress=progress, threads=1)
    assert calls and {"best", "bound", "elapsed"} <= set(calls[0])
    assert r.assignment is not None
    assert r.status == Status.FEASIBLE and not r.proven_optimal
    assert r.interrupted


def test_stats_record_the_run():
    r = cpsat(instance([3, 4, 5], 8, racks=1, per_rack=3), time_limit=5, seed=7, threads=1)
    s = r.stats
    assert s["seed"] == 7 and s["threads"] == 1 and s["time_limit"] == 5
    assert s["ortools_version"].startswith("9.")
    assert s["unit_bytes"] >= 1 and s["phases"]


# ----------------------------------------------------------------------------------------- kimi-k3
def _kimi(mode):
    m = load_model("kimi-k3")
    return make_instance(m, load_fleet("wse-3t"), workload_for(m), mode=mode)


def test_kimi_k3_contiguous_is_70_wafers_proven():
    """(K K K M) x 23 + M: each K K K takes two wafers (two 16.9 GB layers fit, three do not) and
    each 43.9 GB MLA layer a wafer of its own: 23 x 3 + 1 = 70 stages. A path of 70 wafers in racks
    of 3 crosses at least 23 rack boundaries: 46 x 2 us + 23 x 3 us = 161 us."""
    r = cpsat(_kimi("contiguous"), time_limit=60)
    assert r.devices_used == 70 and r.hop_latency_us == 161
    assert r.proven_optimal and r.status == Status.OPTIMAL


def test_kimi_k3_free_is_59_wafers_proven():
    """Free mode packs K layers two per wafer whatever their order: 24 MLA + ceil(69 / 2) = 59."""
    r = cpsat(_kimi("free"), time_limit=60, objective="devices")
    assert r.devices_used == 59 and r.bound == 59
    assert r.proven_optimal and r.status == Status.OPTIMAL


def test_model_invalid_is_a_bug_not_an_answer():
    """A model CP-SAT refuses (here a coefficient that overflows int64) raises ModelInvalid with
    CP-SAT's own reason, instead of reading as "no placement within the time limit"."""
    from ortools.sat.python import cp_model

    m = cp_model.CpModel()
    x = m.new_int_var(0, 2**40, "x")
    m.add(x * 2**40 <= 5)
    m.minimize(x)
    with pytest.raises(ora.ModelInvalid, match="refused"):
        ora.solve(m, {"x": [x]}, params=ora.parameters(time_limit=5, seed=0, threads=1))
