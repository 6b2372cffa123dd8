"""The known-optimum battery, run by every method the registry marks exact, in every mode it places in.

Each instance's optimum is computed by hand (and cross-checked by brute force in the test); no
method's own output is used as an expected value.
"""

from __future__ import annotations

import random

import pytest
from algo_instances import brute_bin_packing, brute_min_stages, chain_model, fleet, instance

from placer.algorithms import place
from placer.algorithms.registry import EXACT_METHODS, REGISTRY
from placer.problem.instance import make_instance
from placer.problem.placement import Status
from placer.specs.workload import Workload

FAST = dict(time_limit=20.0, threads=2, seed=0)

CASES = [(m, mode) for m in EXACT_METHODS for mode in REGISTRY[m].modes]


def _place(inst, name, **extra):
    opts = dict(FAST, **extra) if REGISTRY[name].options is not None else {}
    return place(inst, name, **opts)


def _cut(capacities, pieces, seed):
    rng = random.Random(seed)
    out = []
    for c in capacities:
        cuts = sorted(rng.sample(range(1, c), pieces - 1))
        b = [0, *cuts, c]
        out.append([y - x for x, y in zip(b, b[1:])])
    return out


def test_the_battery_covers_every_exact_method_and_mode():
    """The battery's parameters are read from the registry: every exact placing method, every mode."""
    assert "cpsat" in EXACT_METHODS and "dp" in EXACT_METHODS
    assert ("dp", "contiguous") in CASES and ("cpsat", "free") in CASES and ("cpsat", "split") in CASES
    assert ("dp", "free") not in CASES


@pytest.mark.parametrize("name,mode", CASES)
@pytest.mark.parametrize("capacities", [[50] * 6, [40, 40, 70, 70, 90, 90]])
def test_perfect_packings_are_solved_to_their_optimum(name, mode, capacities):
    """Full devices cut into layers: the weights sum to exactly the fleet's bytes, so every device is
    needed and the optimum is the fleet size in every mode; each exact method finds and proves it."""
    parts = _cut(capacities, 4, seed=len(capacities) + sum(capacities))
    weights = [w for p in parts for w in p]
    assert sum(weights) == sum(capacities)
    fl = fleet(None, groups=[(c, 1, 1) for c in capacities], topology="full")
    inst = make_instance(chain_model(weights), fl, Workload(concurrency=0), mode=mode,
                         granularity="shards:2" if mode == "split" else "layer")
    r = _place(inst, name, objective="devices")
    assert r.devices_used == len(capacities), r.message
    assert r.status == Status.OPTIMAL and r.proven_optimal and r.devices_proven
    assert r.bound == len(capacities)


@pytest.mark.parametrize("name,mode", CASES)
def test_bin_packing_known_optimum(name, mode):
    """Sizes 6,5,3,6,4,2,5,4,3 (38 B) on devices of 10 B. Free: volume says 4 and 4 bins work
    (6+4, 6+4, 5+5, 3+3+2). In pipeline order the greedy cut 6|5,3|6,4|2,5|4,3 gives 5 stages and
    no 4 contiguous runs of at most 10 exist (brute force agrees)."""
    sizes = [6, 5, 3, 6, 4, 2, 5, 4, 3]
    want = {"free": 4, "contiguous": 5, "split": 5}[mode]
    assert brute_bin_packing(sizes, 10) == 4 and brute_min_stages(sizes, 10) == 5
    inst = make_instance(chain_model(sizes), fleet(10, racks=1, per_rack=len(sizes)), Workload(concurrency=0),
                         mode=mode, granularity="layer")
    r = _place(inst, name, objective="devices")
    assert r.devices_used == want, r.message
    assert r.status == Status.OPTIMAL and r.devices_proven and r.bound == want


@pytest.mark.parametrize("name,mode", CASES)
def test_an_instance_with_no_placement_is_proven_infeasible(name, mode):
    """Weights 7+7+7 = 21 B on two devices of 10 B: no two of the layers share a device (14 > 10),
    so three devices are needed and the fleet has two."""
    inst = instance([7, 7, 7], 10, mode=mode, per_rack=2)
    r = _place(inst, name)
    assert r.status == Status.INFEASIBLE and r.assignment is None
