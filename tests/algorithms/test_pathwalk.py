"""The path walk (issue 10, item 8): a first contiguous placement on sparse fleets.

The oracle enumerates every simple path of a small fleet graph by itself and cuts the chain along
each with its own dynamic program (fewest stages when stage k must run on the path's k-th device).
"""

from __future__ import annotations

import random
import sys

import pytest
from dirs import BENCHMARKS

from placer.algorithms import place, registry
from placer.algorithms.check import check_placement
from placer.algorithms.pathwalk import pathwalk, walk_paths
from placer.planning.studies.compare import COMPARE_ROWS, compare
from placer.problem.instance import make_instance
from placer.problem.placement import Level, Status
from placer.specs.errors import InvalidSpec
from placer.specs.fleet import fleet_from_dict
from placer.specs.model import model_from_dict
from placer.specs.workload import Workload

sys.path.insert(0, str(BENCHMARKS))
from generators import sparse_ring_instance  # noqa: E402


def _ring_specs(memories, sizes, chords=(), name="ring"):
    """Single-device racks on a ring (device i is r{i}w0, ``memories[i]`` GB), ``chords`` as (a, b)
    extra links; a chain of layers of ``sizes`` GB at no live requests: (model, fleet, workload)."""
    types = {f"t{m}": {"memory": f"{m} GB"} for m in sorted(set(memories))}
    spec = {"name": name, "device_types": types,
            "fleet": {"groups": [{"device": f"t{m}", "racks": 1, "per_rack": 1} for m in memories],
                      "intra_rack_latency_us": 1, "inter_rack_latency_us": 3, "inter_rack_topology": "ring",
                      "extra_links": [{"a": f"r{a}w0", "b": f"r{b}w0", "latency_us": 5} for a, b in chords]}}
    layers = [{"kind": "linear_attention", "weight_bytes": s * 10**9, "state_bytes_per_request": 1} for s in sizes]
    return (model_from_dict({"name": "chain", "layers": layers}), fleet_from_dict(spec),
            Workload(context_tokens=1, concurrency=0))


def _ring(memories, sizes, chords=(), name="ring"):
    return make_instance(*_ring_specs(memories, sizes, chords, name))


def _oracle(inst) -> int | None:
    """Fewest devices over every simple path of the fleet graph (own enumeration, own DP)."""
    n = inst.n_devices
    adj = {d: set() for d in range(n)}
    for a, b in inst.fleet.graph.edges():
        ia, ib = inst.device_index[a], inst.device_index[b]
        adj[ia].add(ib)
        adj[ib].add(ia)
    sizes, caps = list(inst.demand_bytes), list(inst.capacity_bytes)
    best = None

    def stages_along(path) -> int | None:
        """Fewest stages when stage k runs on path[k] (no device skipped), or None."""
        m = len(sizes)
        cur = {0}                   # layers covered after k stages, every possibility
        for k, d in enumerate(path):
            new = set()
            for j in cur:
                total = 0
                for e in range(j, m):
                    total += sizes[e]
                    if total > caps[d]:
                        break
                    new.add(e + 1)
            if m in new:
                return k + 1
            cur = new
            if not cur:
                return None
        return None

    def extend(path, seen):
        nonlocal best
        got = stages_along(path)
        if got is not None:
            best = got if best is None else min(best, got)
        for v in adj[path[-1]]:
            if v not in seen:
                seen.add(v)
                path.append(v)
                extend(path, seen)
                path.pop()
                seen.discard(v)

    for s in range(n):
        extend([s], {s})
    return best


def test_a_ring_is_solved_exactly_along_its_arcs():
    """Ring of 8: 10 GB devices except two of 30 GB (r2, r3); 9 layers of 10 GB. A large device
    holds three layers, a small one one: k large devices among s cover 3k + (s - k) layers, so 5
    devices need both large ones (3 + 3 + 1 + 1 + 1) and 4 cannot cover 9."""
    inst = _ring([10, 10, 30, 30, 10, 10, 10, 10], [10] * 9)
    found = walk_paths(inst)
    assert found is not None and found.proven
    assert len(found.order) == 5 == _oracle(inst)
    assert {"r2w0", "r3w0"} <= {inst.devices[d].id for d in found.order}
    r = pathwalk(inst)
    assert r.status == Status.OPTIMAL and r.devices_used == 5


@pytest.mark.parametrize("seed", range(12))
def test_never_below_the_oracle_and_exact_on_rings(seed):
    rng = random.Random(seed)
    n = rng.randint(5, 8)
    memories = [rng.choice([20, 30, 45]) for _ in range(n)]
    chords = []
    if seed % 2:
        a = rng.randrange(n)
        chords = [(a, (a + rng.randint(2, n - 2)) % n)]
    sizes = [rng.choice([7, 9, 14, 20]) for _ in range(rng.randint(6, 14))]
    inst = _ring(memories, sizes, chords)
    best = _oracle(inst)
    found = walk_paths(inst)
    if best is None:
        assert found is None
        return
    assert found is not None and len(found.order) >= best
    if not chords:
        assert found.proven and len(found.order) == best
    r = place(inst, "cpsat", time_limit=10, threads=1, objective="devices")
    assert r.feasible and r.devices_used >= best
    if r.levels and r.levels[0].proven:
        assert r.devices_used == best


@pytest.mark.slow
def test_sparse_ring_gets_a_first_placement_and_cpsat_starts_from_it():
    """The issue's family: 150 layers on a ring of 78 single-device racks with chords. The walk
    finds a placement; CP-SAT takes it as its start (recorded) and never returns a worse one."""
    inst = sparse_ring_instance(78, 150, 0, chords=True)
    found = walk_paths(inst)
    assert found is not None
    r = place(inst, "cpsat", time_limit=3, threads=1, objective="devices")
    assert r.feasible and r.devices_used <= len(found.order)
    start = [p for p in r.stats["phases"] if p.get("phase") == "start"]
    assert start and start[0]["devices"] <= len(found.order)


def test_free_mode_start_includes_the_walk():
    """Free mode on the chord-free ring: the device count is proven (arc flow) and the result is
    never worse in devices than the walk's contiguous placement."""
    inst = sparse_ring_instance(78, 150, 0, chords=False, mode="free")
    found = walk_paths(inst)
    r = place(inst, "cpsat", time_limit=5, threads=1, objective="devices")
    assert r.feasible and r.devices_used <= len(found.order)


def test_pathwalk_is_a_registry_method_that_compare_lists_and_place_checks():
    """The ring of the first test (optimum 5 devices, both 30 GB ones): ``place(method="pathwalk")``
    re-checks the placement in exact bytes and links; compare has a row for it; it is a heuristic
    (no place among the exact methods) that says so when it proves the count on a ring."""
    assert registry.MODES_OF["pathwalk"] == ("contiguous", "split")
    assert "pathwalk" in registry.PLACING_METHODS and "pathwalk" not in registry.EXACT_METHODS
    assert ("pathwalk", "contiguous") in COMPARE_ROWS
    memories, sizes = [10, 10, 30, 30, 10, 10, 10, 10], [10] * 9
    inst = _ring(memories, sizes)
    r = place(inst, "pathwalk")
    check_placement(inst, r)
    assert (r.method, r.status, r.devices_used) == ("pathwalk", Status.OPTIMAL, 5) and 5 == _oracle(inst)
    assert r.level("devices") == Level("devices", 5, 5, True)
    # consecutive stages on linked devices, in the order the result states
    assert list(r.order) == list(dict.fromkeys(r.assignment))
    assert all((a, b) in inst.link_us for a, b in zip(r.order, r.order[1:]))
    doc = compare(*_ring_specs(memories, sizes), rows=[("pathwalk", "contiguous"), ("dp", "contiguous")])
    row = {x["method"]: x for x in doc["rows"]}["pathwalk"]
    assert (row["devices_used"], row["proven_optimal"], row["status"]) == (5, True, "optimal")


def test_pathwalk_says_what_it_does_not_place():
    inst = _ring([10, 10, 30, 30, 10, 10, 10, 10], [10] * 9)
    pinned = make_instance(*_ring_specs([10, 10, 30, 30, 10, 10, 10, 10], [10] * 9), pins=["0=r2w0"])
    r = place(pinned, "pathwalk")
    assert r.status == Status.UNKNOWN and "pins" in r.message
    with pytest.raises(InvalidSpec, match="contiguous or split"):
        place(make_instance(*_ring_specs([10, 10, 30, 30, 10, 10, 10, 10], [10] * 9), mode="free"), "pathwalk")
    assert place(inst, "pathwalk").feasible
