"""Reachability (issue 10, item 9): every method respects a fleet cut into pieces by unavailable
devices, and no input ends in an internal error.

The property test compares every method with a brute-force oracle written here: its own byte sums
and its own breadth-first search over the fleet's links.
"""

from __future__ import annotations

import itertools
import random

import pytest

from placer.algorithms import METHODS, MODES_OF, place
from placer.algorithms.reach import in_pieces, node_parts, pieces, reachability_infeasibility, restricted
from placer.problem.instance import make_instance
from placer.problem.placement import Status
from placer.specs.fleet import fleet_from_dict
from placer.specs.model import model_from_dict
from placer.specs.workload import Workload

# the reproducer: a ring of two racks (3 + 2 devices), r0w0 unavailable
CUT_HW = """\
name: cut
device: {memory: 602871159}
fleet:
  groups:
    - {racks: 1, per_rack: 3}
    - {racks: 1, per_rack: 2}
  intra_rack_latency_us: 4.2
  inter_rack_latency_us: 1.7
  inter_rack_topology: ring
  unavailable: [r0w0]
"""
CUT_MODEL = """\
name: m9
layers:
  - {kind: attention, weight_bytes: 587556861, kv_bytes_per_token: 129829}
  - {kind: attention, weight_bytes: 304891984, kv_bytes_per_token: 2135731}
  - {kind: attention, weight_bytes: 561844641, kv_bytes_per_token: 858670}
  - {kind: attention, weight_bytes: 290036289, kv_bytes_per_token: 4092331}
"""
FREE_METHODS = [m for m in METHODS if "free" in MODES_OF[m] and m != "bound"]


def _cut_instance(weights=None, concurrency=3, context=2, mode="free", pins=()):
    import yaml

    spec = yaml.safe_load(CUT_MODEL)
    if weights is not None:
        for layer, w in zip(spec["layers"], weights):
            layer["weight_bytes"] = w
    return make_instance(model_from_dict(spec), fleet_from_dict(yaml.safe_load(CUT_HW)),
                         Workload(context_tokens=context, concurrency=concurrency), mode=mode, pins=pins)


def test_pieces_of_the_cut_ring():
    """r0w0 joined the two racks: what is left is {r0w1, r0w2} and {r1w0, r1w1}."""
    inst = _cut_instance()
    got = sorted(sorted(inst.devices[d].id for d in p) for p in pieces(inst))
    assert got == [["r0w1", "r0w2"], ["r1w0", "r1w1"]]
    assert node_parts(inst) == [[0, 1, 2, 3]]
    one = restricted(inst, pieces(inst)[0])
    assert one.n_devices == 2 and len(pieces(one)) == 1


@pytest.mark.parametrize("method", FREE_METHODS)
def test_the_reproducer_is_infeasible_for_every_method(method):
    """The four layers need 1,787,629,141 B with 3 live requests of 2 tokens; a piece holds
    2 x 602,871,159 B = 1,205,742,318 B, and the layers are linked, so no placement exists."""
    inst = _cut_instance()
    demand = sum(inst.demand_bytes)
    assert demand > 2 * 602871159 - 0 and demand <= 4 * max(inst.capacity_bytes)
    r = place(inst, method)
    assert r.status == Status.INFEASIBLE and r.assignment is None
    assert "2 pieces" in r.message and "one piece" in r.message


@pytest.mark.parametrize("method", FREE_METHODS)
def test_cli_says_why_instead_of_an_internal_error(method, run_cli, write):
    model, hw = write("m9.yaml", CUT_MODEL), write("cut.yaml", CUT_HW)
    code, out, err = run_cli(["solve", model, "-H", hw, "--mode", "free", "--context", "2", "--concurrency", "3",
                              "--method", method])
    assert code == 1, (out, err)
    assert "internal error" not in err and "PlacementBug" not in out + err
    assert "fall into 2 pieces with no route between them" in out


@pytest.mark.parametrize("method", ["ffd", "typepack"])
def test_heuristics_place_inside_one_piece(method):
    """Four 250,000,000 B linear-attention layers at no live requests: two fit a device, so one
    piece of two devices holds them; the heuristics that ignore links place them there (2 devices),
    never across the cut."""
    import yaml

    model = model_from_dict({"name": "small", "layers": [
        {"kind": "linear_attention", "weight_bytes": 250_000_000, "state_bytes_per_request": 1}] * 4})
    inst = make_instance(model, fleet_from_dict(yaml.safe_load(CUT_HW)), Workload(context_tokens=1, concurrency=0),
                         mode="free")
    r = place(inst, method)
    assert r.feasible and r.devices_used == 2
    where = {d: k for k, p in enumerate(pieces(inst)) for d in p}
    assert len({where[d] for d in r.assignment}) == 1
    assert r.stats["pieces"] == 2


def test_pins_in_two_pieces_are_infeasible_with_the_reason():
    from placer.problem.instance import Pin

    inst = _cut_instance(weights=[1000] * 4, concurrency=0, pins=(Pin((0,), "r0w1"), Pin((3,), "r1w0")))
    why = reachability_infeasibility(inst, lambda sub: None)
    assert why is not None and "r0w1, r1w0" in why
    for method in ("cpsat", "ffd"):
        r = place(inst, method)
        assert r.status == Status.INFEASIBLE and "different pieces" in r.message


def test_in_pieces_proves_nothing_from_an_undecided_piece():
    """A connected model must sit in one piece: INFEASIBLE in every piece proves it infeasible, an
    UNKNOWN in any piece does not."""
    from placer.problem.placement import Result

    inst = _cut_instance(weights=[1000] * 4, concurrency=0)
    calls = []

    def answer(status):
        def method(sub, lower_bound=None):
            calls.append(sub.n_devices)
            return Result("probe", sub.mode, status, message="no")
        return method

    assert in_pieces(inst, answer(Status.INFEASIBLE), 0).status == Status.INFEASIBLE
    assert calls == [2, 2]
    assert in_pieces(inst, answer(Status.UNKNOWN), 0).status == Status.UNKNOWN


# ----------------------------------------------------------------------------- property test
def _oracle_free(weights, requests, c, caps, links, n_dev) -> int | None:
    """Fewest devices of a free placement by brute force (None when there is none): node i needs
    weights[i] + c * requests[i] bytes; an edge i -> i+1 needs a route between its devices."""
    reach = [{d} for d in range(n_dev)]
    for d in range(n_dev):
        frontier = [d]
        while frontier:
            x = frontier.pop()
            for a, b in links:
                for u, v in ((a, b), (b, a)):
                    if u == x and v not in reach[d]:
                        reach[d].add(v)
                        frontier.append(v)
    need = [w + c * r for w, r in zip(weights, requests)]
    best = None
    for assign in itertools.product(range(n_dev), repeat=len(need)):
        load = [0] * n_dev
        for i, d in enumerate(assign):
            load[d] += need[i]
        if any(load[d] > caps[d] for d in range(n_dev)):
            continue
        if any(assign[i + 1] not in reach[assign[i]] for i in range(len(need) - 1)):
            continue
        used = len(set(assign))
        best = used if best is None else min(best, used)
    return best


def _random_case(rng: random.Random):
    racks = rng.randint(2, 3)
    per = [rng.randint(1, 3) for _ in range(racks)]
    mem = rng.choice([1000, 1300, 2000])
    ids = [f"r{r}w{s}" for r in range(racks) for s in range(per[r])]
    unavailable = rng.sample(ids, rng.randint(1, max(1, len(ids) - 2)))
    if len(unavailable) == len(ids):
        unavailable = unavailable[:-1]
    spec = {"name": "rnd", "device": {"memory": mem},
            "fleet": {"groups": [{"racks": 1, "per_rack": p} for p in per], "intra_rack_latency_us": 1,
                      "inter_rack_latency_us": 2, "inter_rack_topology": rng.choice(["line", "ring"]),
                      "unavailable": unavailable}}
    n = rng.randint(2, 5)
    layers = [{"kind": "attention", "weight_bytes": rng.randint(100, 900), "kv_bytes_per_token": rng.randint(1, 40)}
              for _ in range(n)]
    return model_from_dict({"name": "rnd", "layers": layers}), fleet_from_dict(spec), rng.randint(0, 8)


@pytest.mark.parametrize("seed", range(40))
def test_every_method_respects_reachability_against_an_oracle(seed):
    rng = random.Random(seed)
    model, fleet, c = _random_case(rng)
    wl = Workload(context_tokens=1, concurrency=c)
    inst = make_instance(model, fleet, wl, mode="free")
    caps = list(inst.capacity_bytes)
    ids = [d.id for d in inst.devices]
    idx = {d: i for i, d in enumerate(ids)}
    links = [(idx[a], idx[b]) for a, b in fleet.graph.edges() if a in idx and b in idx]
    best = _oracle_free(list(inst.weight_bytes), list(inst.request_bytes), c, caps, links, len(ids))
    for method in FREE_METHODS:
        r = place(inst, method, **({"time_limit": 5, "threads": 1} if method == "cpsat" else {}))
        if r.assignment is not None:     # place() re-checked it; the oracle must agree it is valid
            assert best is not None and r.devices_used >= best, (method, r.message)
        if r.status == Status.INFEASIBLE:
            assert best is None, (method, r.message)
        if method == "cpsat" and best is None:
            assert r.status == Status.INFEASIBLE, r.message
        if method == "cpsat" and r.proven_optimal:
            assert r.devices_used == best
    for mode in ("contiguous",):
        cinst = make_instance(model, fleet, wl, mode=mode)
        for method in [m for m in METHODS if mode in MODES_OF[m]]:
            r = place(cinst, method, **({"time_limit": 5, "threads": 1} if method == "cpsat" else {}))
            if r.assignment is not None:
                assert best is not None and r.devices_used >= best     # contiguous is never below free


# ----------------------------------------------------------------------------- unlinked parts
def _parts_instance(weights, edges, memory=2000, unavailable=("r1w0", "r1w1"), concurrency=0):
    """Free mode; a model whose layer graph has only ``edges`` (library-built: model specs are
    chains), on three racks of two devices in a line with the middle rack unavailable."""
    from dataclasses import replace

    layers = [{"kind": "linear_attention", "weight_bytes": w, "state_bytes_per_request": 1,
               "activation_elements_per_token": 0} for w in weights]
    model = replace(model_from_dict({"name": "parts", "layers": layers}), edges=tuple(edges))
    fleet = fleet_from_dict({"name": "cut", "device": {"memory": memory},
                             "fleet": {"racks": 3, "per_rack": 2, "inter_rack_topology": "line",
                                       "unavailable": list(unavailable)}})
    return make_instance(model, fleet, Workload(context_tokens=1, concurrency=concurrency), mode="free")


@pytest.mark.parametrize("method", FREE_METHODS)
def test_a_part_no_piece_holds_is_the_proven_reason(method):
    """Two unlinked parts: layers 0-4 (5 x 900 B, linked) and layer 5 alone. Each piece of the cut
    fleet has 2 devices of 2,000 B, and the first part needs 3 (4,500 B): no placement, whatever
    the method, and the reason names the part (before, CP-SAT only said it proved none exists)."""
    inst = _parts_instance([900] * 5 + [500], [(0, 1), (1, 2), (2, 3), (3, 4)])
    assert len(node_parts(inst)) == 2 and len(pieces(inst)) == 2
    r = place(inst, method, **({"time_limit": 10, "threads": 1} if method == "cpsat" else {}))
    assert r.status == Status.INFEASIBLE
    assert "2 unlinked parts" in r.message and "the part of 5 nodes layers.0..layers.4" in r.message
    assert "at least 3 devices are needed" in r.message and "the piece has 2 available" in r.message


def test_unlinked_parts_that_each_fit_a_piece_are_not_ruled_out():
    """The same fleet, parts {0, 1}, {2, 3}, {4} of 900 B layers and a 1,500 B layer: each part fits
    one device, so nothing is ruled out and CP-SAT places the model on 3 devices across both pieces
    (as a chain it must sit in one piece of 4,000 B: no placement)."""
    inst = _parts_instance([900] * 4 + [1500], [(0, 1), (2, 3)])
    assert reachability_infeasibility(inst, lambda i: None) is None
    r = place(inst, "cpsat", time_limit=10, threads=1)
    assert r.proven_optimal and r.devices_used == 3
    chain = _parts_instance([900] * 4 + [1500], [(i, i + 1) for i in range(4)])
    assert place(chain, "cpsat", time_limit=10, threads=1).status == Status.INFEASIBLE


def _oracle_edges(need, caps, edges, reach) -> bool:
    """Whether some assignment fits every device and puts each edge's ends on devices with a route."""
    for assign in itertools.product(range(len(caps)), repeat=len(need)):
        load = [0] * len(caps)
        for i, d in enumerate(assign):
            load[d] += need[i]
        if all(load[d] <= caps[d] for d in range(len(caps))) and all(assign[v] in reach[assign[u]]
                                                                       for u, v in edges):
            return True
    return False


def test_unlinked_parts_reasons_are_sound_against_an_oracle():
    """Random models of unlinked parts on the cut fleet: whenever the reachability guard gives a
    reason, brute force (its own byte sums, the pieces by hand: {0, 1} and {2, 3}) finds no
    placement; and the guard does fire on some of them, naming a part."""
    rng = random.Random(10)
    fired = 0
    reach = [{0, 1}, {0, 1}, {2, 3}, {2, 3}]
    for _ in range(60):
        n = rng.randint(3, 6)
        weights = [rng.randint(300, 1900) for _ in range(n)]
        edges = sorted({(u, v) for u in range(n) for v in range(u + 1, n) if rng.random() < 0.35})
        inst = _parts_instance(weights, edges)
        if len(node_parts(inst)) < 2:
            continue
        from placer.algorithms.guards import infeasibility

        why = infeasibility(inst)
        if why is not None and "unlinked parts" in why[0]:
            fired += 1
            assert not _oracle_edges(weights, [2000] * 4, edges, reach), (weights, edges, why)
    assert fired >= 3
