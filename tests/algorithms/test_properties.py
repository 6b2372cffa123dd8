"""Property-based tests over random small models, fleets and workloads (hypothesis).

Models are explicit-form specs of 2-12 attention / linear-attention layers with random weights,
KV and state sizes; fleets are 1-3 racks of 1-4 devices of one or two types with a full, ring or
line inter-rack topology; workloads vary context and concurrency. The oracle for "valid" is the
independent validator (``placer.mapping.validate``), which shares no code with the methods.

Device counts are compared only where a method proves them: a count is proven when it equals the
method's own proven lower bound (``Result.bound``); the DP and CP-SAT set it that way.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import fleets, models, workloads

from placer.algorithms import MODES_OF, place
from placer.mapping import build_mapping
from placer.mapping.validate import validate_mapping
from placer.problem.instance import make_instance
from placer.problem.placement import Status

CPSAT = dict(time_limit=20.0, seed=0, threads=1)
HEURISTICS = ("greedy", "dp", "typepack", "ffd")
PROPERTY_SETTINGS = settings(max_examples=80, deadline=None, derandomize=True,
                             suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def devices_proven(r) -> bool:
    """The result's device count is proven minimal (equals its proven lower bound)."""
    return r.feasible and r.bound is not None and r.devices_used == round(r.bound)


def assert_valid(instance, result, model, fleet, wl):
    doc = build_mapping(instance, result)
    violations = validate_mapping(doc, model=model, fleet=fleet, workload=wl)
    assert violations == [], [v.to_dict() for v in violations]


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(model=models(), fleet=fleets(), wl=workloads,
       mode=st.sampled_from(["contiguous", "free", "split"]))
def test_every_method_validates_and_cpsat_lies_between_bound_and_heuristics(model, fleet, wl, mode):
    """Every feasible result passes the validator; CP-SAT uses at least the lower bound and no more
    devices than any heuristic in the same mode; an INFEASIBLE claim is never contradicted; CP-SAT
    says OPTIMAL exactly when it proved it, at its bound."""
    inst = make_instance(model, fleet, wl, mode=mode, granularity="shards:2" if mode == "split" else "layer")
    exact = place(inst, "cpsat", **CPSAT)
    lb = place(inst, "bound").lower_bound_devices
    results = {"cpsat": exact}
    for method in HEURISTICS:
        if mode in MODES_OF[method]:
            results[method] = place(inst, method)
    for r in results.values():
        if r.feasible:
            assert_valid(inst, r, model, fleet, wl)
    # honest status: optimal exactly when proven, and proven only at the bound
    assert exact.proven_optimal == (exact.status == Status.OPTIMAL)
    if exact.proven_optimal:
        assert exact.devices_used == round(exact.bound) and exact.gap == 0.0
    if exact.feasible:
        assert lb <= exact.devices_used
        for method, r in results.items():
            if r.feasible:
                assert exact.devices_used <= r.devices_used, (method, r.devices_used, exact.message)
    elif exact.status == Status.INFEASIBLE:
        assert not any(r.feasible for r in results.values())
    else:
        assert exact.status == Status.UNKNOWN
        assert not any(r.feasible for r in results.values()), "a heuristic placed what CP-SAT did not"


@PROPERTY_SETTINGS
@given(model=models(), fleet=fleets(two_types=False), wl=workloads)
def test_dp_and_cpsat_agree_on_chains_with_identical_devices(model, fleet, wl):
    inst = make_instance(model, fleet, wl, mode="contiguous")
    dp = place(inst, "dp")
    exact = place(inst, "cpsat", **CPSAT)
    if dp.status == Status.INFEASIBLE:
        assert exact.status == Status.INFEASIBLE, exact.message
    if exact.status == Status.INFEASIBLE:
        assert not dp.feasible
    if dp.feasible and exact.feasible and devices_proven(dp) and devices_proven(exact):
        assert dp.devices_used == exact.devices_used
    if dp.feasible and devices_proven(dp):
        assert exact.feasible and exact.devices_used == dp.devices_used


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(model=models(max_size=8), fleet=fleets(), wl=workloads,
       mode=st.sampled_from(["contiguous", "free"]), data=st.data())
def test_adding_a_device_never_increases_the_optimum(model, fleet, wl, mode, data):
    """The fleet without one device (chosen at random) is the smaller fleet; the full one is it plus a device."""
    removed = data.draw(st.sampled_from([d.id for d in fleet.available]))
    smaller = fleet.without([removed])
    if not smaller.available:
        return
    big = place(make_instance(model, fleet, wl, mode=mode), "cpsat", **CPSAT)
    small = place(make_instance(model, smaller, wl, mode=mode), "cpsat", **CPSAT)
    if small.feasible:
        assert big.feasible, big.message
        if devices_proven(small) and devices_proven(big):
            assert big.devices_used <= small.devices_used
    if big.status == Status.INFEASIBLE:
        assert small.status == Status.INFEASIBLE


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(model=models(max_size=8), fleet=fleets(), wl=workloads, extra=st.integers(1, 200),
       mode=st.sampled_from(["contiguous", "free"]))
def test_raising_the_target_concurrency_never_decreases_the_optimum(model, fleet, wl, extra, mode):
    low = make_instance(model, fleet, wl, mode=mode)
    high = low.with_concurrency(wl.concurrency + extra)
    a = place(low, "cpsat", **CPSAT)
    b = place(high, "cpsat", **CPSAT)
    if b.feasible:
        assert a.feasible, a.message
        if devices_proven(a) and devices_proven(b):
            assert a.devices_used <= b.devices_used
    if a.status == Status.INFEASIBLE:
        assert b.status == Status.INFEASIBLE
