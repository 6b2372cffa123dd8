"""Numeric safety: petabyte sizes, thousands of devices, and CP-SAT's integer limits.

CP-SAT works on integers, and OR-Tools 9.15 can drop an enforcement literal in presolve when a
row's coefficients sum above 2^31 (google/or-tools#5293, cpsat.md section 2): a capacity row in raw
bytes (``sum bytes * x <= capacity * used``) is exactly that pattern, and the symptom is a wrong
"optimal" answer. Placer quantizes (demands rounded up, capacities rounded down, rows below 2^31)
and re-checks every placement in exact bytes. These tests hold it to that with instances whose raw
byte sums are far above 2^31 and whose answers are known by construction or from the exact DP.
"""

from __future__ import annotations

import random

import pytest

from placer.algorithms import PlacementBug, place
from placer.algorithms.quantize import ROW_LIMIT, check_row, choose_unit
from placer.mapping import build_mapping
from placer.mapping.validate import validate_mapping
from placer.planning.studies.explain import diagnose
from placer.problem.instance import make_instance
from placer.problem.placement import Status, evaluate
from placer.specs.errors import SolverLimitError
from placer.specs.fleet import fleet_from_dict
from placer.specs.model import model_from_dict
from placer.specs.workload import Workload

TB, PB = 10**12, 10**15
NO_REQUESTS = Workload(context_tokens=1, concurrency=0)


def _model(weights, name="big"):
    """A chain of linear-attention layers of exactly ``weights`` bytes (1 B of state, no activations)."""
    return model_from_dict({"name": name, "layers": [
        {"kind": "linear_attention", "weight_bytes": w, "state_bytes_per_request": 1,
         "activation_elements_per_token": 0} for w in weights]})


def _fleet(memory, racks, per_rack, topology="full", name="hw"):
    return fleet_from_dict({"name": name, "device": {"memory": memory},
                            "fleet": {"racks": racks, "per_rack": per_rack, "inter_rack_topology": topology}})


def _valid(inst, result, model, fleet, wl):
    assert result.feasible, result.message
    violations = validate_mapping(build_mapping(inst, result), model=model, fleet=fleet, workload=wl)
    assert violations == [], [v.to_dict() for v in violations]


# ----------------------------------------------------------------------------- quantization
def test_quantization_is_conservative_and_keeps_rows_below_2_31():
    """100 TB-class demands with no common divisor on 1 PB-class devices: a power-of-two unit,
    every demand rounded up, every capacity rounded down, every row sum below 2^31."""
    demand = [100 * TB + i for i in range(1, 29)]
    capacity = [PB + 55, PB - 3, 2 * PB + 1]
    assert sum(demand) > 2**31
    q = choose_unit(demand, capacity)
    assert not q.exact and q.unit > 1 and q.unit & (q.unit - 1) == 0
    for raw, units in zip(demand, q.demand):
        assert units * q.unit >= raw > (units - 1) * q.unit
    for raw, units in zip(capacity, q.capacity):
        assert units * q.unit <= raw < (units + 1) * q.unit
    assert q.row_sum == sum(q.demand) + max(q.capacity) <= ROW_LIMIT
    # the finest such unit: half of it would overflow the row
    half = q.unit // 2
    assert sum(-(-d // half) for d in demand) + max(capacity) // half > ROW_LIMIT


def test_exact_unit_when_sizes_share_a_divisor():
    demand = [3 * 2**40, 5 * 2**40, 2**41]
    q = choose_unit(demand, [16 * 2**40])
    assert (q.unit, q.exact, q.demand, q.capacity) == (2**40, True, (3, 5, 2), (16,))


def test_a_row_at_2_31_is_refused_before_building():
    check_row(ROW_LIMIT, "capacity row")
    with pytest.raises(SolverLimitError, match="5293"):
        check_row(ROW_LIMIT + 1, "capacity row")


# ----------------------------------------------------------------------------- petabytes
def test_petabyte_devices_with_100_tb_layers_where_rounding_would_cost_a_device():
    """28 layers of 100 TB + i bytes (i = 1..28) on devices of 1 PB + 55 B. In bytes, layers 1..10 fill
    one device exactly (offsets sum to 55) and 9 of any others fit one, so the optimum is 3 devices
    (a 4th is needed once 10 layers no longer share a device). Rounded to a power-of-two unit, 10 never
    fit one device and 4 would be needed: the answer must come out in exact bytes."""
    model = _model([100 * TB + i for i in range(1, 29)], name="pb-layers")
    fleet = _fleet(PB + 55, racks=2, per_rack=3, name="pb-devices")
    q = choose_unit([100 * TB + i for i in range(1, 11)], [PB + 55])
    assert sum(q.demand[:10]) > q.capacity[0], "rounding alone would split the first 10 layers"
    for mode in ("contiguous", "split", "free"):
        inst = make_instance(model, fleet, NO_REQUESTS, mode=mode,
                             granularity="shards:2" if mode == "split" else "layer")
        r = place(inst, "cpsat", time_limit=5, seed=0, threads=1)
        _valid(inst, r, model, fleet, NO_REQUESTS)
        assert r.devices_used == 3, (mode, r.message)
        assert r.bound == 3.0
        if mode != "free":
            dp = place(inst, "dp")
            assert (dp.devices_used, dp.proven_optimal) == (3, True)


def test_exabyte_scale_sizes_stay_exact():
    """Devices at the 1 EB limit holding 100 PB layers: 25 layers need exactly 3 devices (10 per device)."""
    model = _model([100 * PB] * 25, name="eb-layers")
    fleet = _fleet(10**18, racks=1, per_rack=4, name="eb-devices")
    for mode in ("contiguous", "free"):
        inst = make_instance(model, fleet, NO_REQUESTS, mode=mode)
        r = place(inst, "cpsat", time_limit=5, seed=0, threads=1)
        _valid(inst, r, model, fleet, NO_REQUESTS)
        assert (r.devices_used, r.proven_optimal) == (3, True)


# ----------------------------------------------------------------------------- google/or-tools#5293
def _perfect_pieces(k: int, capacity: int, pieces: int, seed: int) -> list[int]:
    """``k`` devices' capacities each cut at random byte offsets into ``pieces`` parts (no common divisor)."""
    rng = random.Random(seed)
    out = []
    for _ in range(k):
        cuts = sorted(rng.sample(range(1, capacity), pieces - 1))
        out += [b - a for a, b in zip([0, *cuts], [*cuts, capacity])]
    return out


def test_large_coefficient_capacity_rows_give_the_dp_optimum_5293():
    """A contiguous chain with a pin (so CP-SAT builds its general model with capacity rows gated by
    `used[d]`, the pattern of google/or-tools#5293) whose raw byte coefficients sum to ~1e11, far
    above 2^31. The DP is exact for identical devices with pins; CP-SAT must agree and validate."""
    rng = random.Random(5293)
    weights = [rng.randint(10**9, 9 * 10**9) for _ in range(40)]
    model = _model(weights, name="gb-chain")
    fleet = _fleet(24 * 10**9 + 7, racks=4, per_rack=4, name="gb-devices")
    assert sum(weights) > 50 * 2**31
    inst = make_instance(model, fleet, NO_REQUESTS, pins=("0=r1w2",))
    dp = place(inst, "dp")
    exact = place(inst, "cpsat", time_limit=20, seed=0, threads=1)
    assert dp.proven_optimal and dp.level("devices").proven, dp.message
    _valid(inst, exact, model, fleet, NO_REQUESTS)
    assert exact.devices_used == dp.devices_used, exact.message
    assert exact.assignment[0] == inst.device_index["r1w2"]


def test_large_coefficient_bin_packing_reaches_the_optimum_by_construction():
    """Free mode: 4 devices' worth of 24 GB, each cut into 9 random byte-sized pieces (36 nodes, no
    common divisor, total 96 GB), on devices of 24 GB + 1 MB: the optimum is exactly 4 (the volume
    bound), and 1 MB of slack per device absorbs any rounding of 9 pieces."""
    sizes = _perfect_pieces(4, 24 * 10**9, 9, seed=7)
    model = _model(sizes, name="pieces")
    fleet = _fleet(24 * 10**9 + 10**6, racks=2, per_rack=4, name="gb-devices")
    inst = make_instance(model, fleet, NO_REQUESTS, mode="free")
    # a generous limit, not a speed claim: the search stops as soon as it meets the bound
    r = place(inst, "cpsat", time_limit=300, seed=0, threads=1, objective="devices")
    _valid(inst, r, model, fleet, NO_REQUESTS)
    assert (r.devices_used, r.bound) == (4, 4.0), r.message


def test_zero_slack_packing_is_never_overstated():
    """The same pieces on devices of exactly 24 GB + 7 B: every device of the optimum is full to the
    byte, so any rounding unit loses it. Whatever CP-SAT returns must validate, never beat the
    optimum, carry a valid bound, and say when rounding may have cost a device."""
    cap = 24 * 10**9 + 7
    sizes = _perfect_pieces(4, cap, 9, seed=7)
    model = _model(sizes, name="pieces")
    fleet = _fleet(cap, racks=2, per_rack=4, name="gb-devices")
    inst = make_instance(model, fleet, NO_REQUESTS, mode="free")
    r = place(inst, "cpsat", time_limit=10, seed=0, threads=1)
    _valid(inst, r, model, fleet, NO_REQUESTS)
    assert r.devices_used >= 4 and r.bound == 4.0
    if r.devices_used > 4:
        assert not r.proven_optimal and r.status == Status.FEASIBLE
        assert "rounded" in r.message and "may have cost a device" in r.message


# ----------------------------------------------------------------------------- thousands of devices
@pytest.mark.slow
def test_two_thousand_device_ring():
    """A ring of 2,000 racks of one 1 PB device; 12 layers of 300-377 TB with KV for 1,000 requests of
    1M tokens. Five devices (the DP's proven count); every result validated in exact bytes."""
    layers = []
    for i in range(12):
        entry = {"kind": "attention" if i % 4 == 3 else "linear_attention", "weight_bytes": f"{300 + 7 * i} TB"}
        entry["kv_bytes_per_token" if i % 4 == 3 else "state_bytes_per_request"] = 5000
        layers.append(entry)
    model = model_from_dict({"name": "ring-model", "layers": layers})
    fleet = _fleet("1 PB", racks=2000, per_rack=1, topology="ring", name="ring-2000")
    wl = Workload(context_tokens=2**20, concurrency=1000)
    assert len(fleet.available) == 2000
    contiguous = make_instance(model, fleet, wl)
    dp = place(contiguous, "dp")
    assert (dp.devices_used, dp.proven_optimal) == (5, True)
    for mode in ("contiguous", "free"):
        inst = contiguous if mode == "contiguous" else make_instance(model, fleet, wl, mode="free")
        r = place(inst, "cpsat", time_limit=5, seed=0, threads=1)
        _valid(inst, r, model, fleet, wl)
        assert r.devices_used == 5 and r.bound == 5.0, (mode, r.message)
        # five devices in a ring of single-device racks: four hops of 3 us at least
        assert r.hops == 4 and r.hop_latency_us >= 12.0


# ----------------------------------------------------------------------------- absurd requests
def test_absurd_workload_is_infeasible_with_exact_integers():
    """10^9 requests of 2^30 tokens at 1 kB per token: 1.07e21 B per layer, computed exactly, reported
    infeasible (no overflow, no float), and the explanation finds the largest concurrency that fits."""
    model = model_from_dict({"name": "absurd", "layers": [
        {"kind": "attention", "weight_bytes": "1 TB", "kv_bytes_per_token": 1000}] * 2})
    fleet = _fleet("1 PB", racks=1, per_rack=2, name="pb")
    wl = Workload(context_tokens=2**30, concurrency=10**9)
    inst = make_instance(model, fleet, wl)
    need = 10**12 + 10**9 * 2**30 * 1000
    assert inst.demand_bytes == (need, need)
    r = place(inst, "cpsat", time_limit=5, seed=0, threads=1)
    assert r.status == Status.INFEASIBLE
    e = diagnose(inst, time_limit=10)
    # one layer per device: floor((1e15 - 1e12) / (2^30 x 1000)) = 930 requests
    assert e.max_concurrency == (PB - 10**12) // (2**30 * 1000) == 930
    assert f"{need:,} B" in e.culprits[0]


# ----------------------------------------------------------------------------- the exact re-check
def test_a_method_returning_an_overfull_device_is_caught(monkeypatch):
    """place() re-checks every placement in exact bytes: a method that puts everything on one device
    (1 B over its capacity) raises PlacementBug instead of returning it."""
    import placer.algorithms.greedy as greedy_module

    model = _model([5 * 10**9, 5 * 10**9 + 1])
    fleet = _fleet(10**10, racks=1, per_rack=2)
    inst = make_instance(model, fleet, NO_REQUESTS)

    def overfull(instance, **_):
        return evaluate(instance, [0] * instance.n_nodes, method="greedy", status=Status.HEURISTIC)

    monkeypatch.setattr(greedy_module, "greedy", overfull)
    with pytest.raises(PlacementBug):
        place(inst, "greedy")
