"""The requirement kinds (placer.problem.instance.REQUIREMENTS) against the independent brute-force oracle:
every exact method that claims a proof honours them, and the constrained optimum is the oracle's."""

from __future__ import annotations

import itertools
import random
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import solve as oracle_solve

from placer.algorithms import place
from placer.algorithms.chain import covered_bottleneck_ends, covered_ends, prefix_sums
from placer.algorithms.check import requirement_violation
from placer.problem.instance import make_instance
from placer.problem.placement import Status
from placer.specs.errors import InvalidSpec
from placer.specs.fleet import fleet_from_dict
from placer.specs.model import model_from_dict
from placer.specs.workload import Workload

DECODER = ("attention", "linear_attention")


def _case(seed: int):
    rng = random.Random(seed)
    layers = []
    if rng.random() < 0.4:
        layers.append({"kind": "vision", "weight_bytes": rng.randint(2, 20)})
    if rng.random() < 0.8:
        layers.append({"kind": "embedding", "weight_bytes": rng.randint(5, 25)})
    for _ in range(rng.randint(2, 4)):
        if rng.random() < 0.6:
            layers.append({"kind": "attention", "weight_bytes": rng.randint(5, 25), "kv_bytes_per_token": rng.randint(1, 3)})
        else:
            layers.append({"kind": "linear_attention", "weight_bytes": rng.randint(5, 25),
                           "state_bytes_per_request": rng.randint(1, 3)})
    if rng.random() < 0.8:
        layers.append({"kind": "lm_head", "weight_bytes": rng.randint(5, 25)})
    if rng.random() < 0.5:
        spec = {"name": "hw", "device": {"memory": rng.randint(30, 55)},
                "fleet": {"racks": 2, "per_rack": 2, "intra_rack_latency_us": round(rng.uniform(0.5, 2), 3),
                          "inter_rack_latency_us": round(rng.uniform(2, 5), 4)}}
    else:
        types = {"a": {"memory": rng.randint(30, 55)}, "b": {"memory": rng.randint(30, 55)}}
        spec = {"name": "hw", "device_types": types,
                "fleet": {"intra_rack_latency_us": round(rng.uniform(0.5, 2), 3),
                          "inter_rack_latency_us": round(rng.uniform(2, 5), 4),
                          "groups": [{"device": "a", "racks": 1, "per_rack": 2},
                                     {"device": "b", "racks": 1, "per_rack": 2}]}}
    kinds = [k for k in ("attention-per-stage", "decoder-per-stage", "embedding-first-head-last") if rng.random() < 0.6]
    return layers, spec, rng.randint(0, 2), tuple(kinds)


def _instance(layers, spec, concurrency, require, mode="contiguous"):
    model = model_from_dict({"name": "m", "layers": layers})
    return make_instance(model, fleet_from_dict(spec), Workload(concurrency=concurrency, context_tokens=1),
                         mode=mode, require=require)


def _holds(layers, assignment, require) -> bool:
    """The requirements, checked here on the plain spec (not by placer's code)."""
    held: dict[int, list[int]] = {}
    for i, d in enumerate(assignment):
        held.setdefault(d, []).append(i)
    if "attention-per-stage" in require and any(all(layers[i]["kind"] != "attention" for i in ns)
                                                for ns in held.values()):
        return False
    if "decoder-per-stage" in require and any(all(layers[i]["kind"] not in DECODER for i in ns)
                                              for ns in held.values()):
        return False
    if "embedding-first-head-last" in require:
        for i, x in enumerate(layers):
            if x["kind"] == "embedding" and assignment[i] != assignment[0]:
                return False
            if x["kind"] == "lm_head" and assignment[i] != assignment[-1]:
                return False
    return True


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**9), st.sampled_from(["contiguous", "free"]))
def test_exact_methods_meet_the_constrained_optimum(seed, mode):
    layers, spec, concurrency, require = _case(seed)
    if mode == "free":
        require = tuple(r for r in require if r != "embedding-first-head-last")
    opt = oracle_solve(layers, spec, mode=mode, concurrency=concurrency,
                       attention_per_stage="attention-per-stage" in require,
                       decoder_per_stage="decoder-per-stage" in require,
                       embedding_first_head_last="embedding-first-head-last" in require)
    inst = _instance(layers, spec, concurrency, require, mode)
    for method in (("cpsat", "dp") if mode == "contiguous" else ("cpsat",)):
        opts = {"time_limit": 10, "threads": 1, "seed": 0, "objective": "lex"} if method == "cpsat" else {}
        r = place(inst, method, **opts)
        if opt.devices is None:
            assert not r.feasible, (method, r.message)
            continue
        assert r.status != Status.INFEASIBLE, (method, r.message)
        if r.lower_bound_devices is not None:
            assert r.lower_bound_devices <= opt.devices, (method, r.message)
        if not r.feasible:
            continue
        assert _holds(layers, r.assignment, require), (method, r.assignment)
        assert r.devices_used >= opt.devices
        if r.devices_proven:
            assert r.devices_used == opt.devices, (method, r.message)
        lat = r.level("latency")
        if lat is not None and lat.proven and r.devices_used == opt.devices:
            assert abs(Fraction(str(r.hop_latency_us)) - opt.latency) <= Fraction(1, 10**9), (method, r.message)
        if method == "cpsat":
            # CP-SAT proves both levels on instances this small
            assert r.proven_optimal, r.message
            assert r.devices_used == opt.devices
            assert abs(Fraction(str(r.hop_latency_us)) - opt.latency) <= Fraction(1, 10**9), r.message


def _fewest_covered(demand, cap, covers):
    """Fewest contiguous segments within ``cap`` each holding a node of every cover, by trying every
    set of cut points; None when there is none."""
    n = len(demand)
    best = None
    for mask in range(1 << (n - 1)):
        cuts = [i + 1 for i in range(n - 1) if mask >> i & 1]
        bounds = [0, *cuts, n]
        segs = list(zip(bounds, bounds[1:]))
        if all(sum(demand[a:b]) <= cap and all(any(a <= x < b for x in c) for c in covers) for a, b in segs):
            if best is None or len(segs) < best[0] or (len(segs) == best[0] and
                                                       max(sum(demand[a:b]) for a, b in segs) < best[1]):
                best = (len(segs), max(sum(demand[a:b]) for a, b in segs))
    return best


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 9), min_size=1, max_size=9), st.integers(5, 25),
       st.lists(st.lists(st.integers(0, 8), min_size=1, max_size=4), max_size=2))
def test_covered_ends_against_every_cut(demand, cap, covers):
    covers = [sorted({x for x in c if x < len(demand)}) for c in covers]
    covers = [c for c in covers if c]
    prefix = prefix_sums(demand)
    want = _fewest_covered(demand, cap, covers)
    got = covered_ends(prefix, cap, covers)
    if want is None:
        assert got is None
        return
    assert got is not None and len(got) == want[0]
    ends = covered_bottleneck_ends(prefix, cap, want[0], covers)
    segs = list(zip([0, *ends], ends))
    assert len(segs) == want[0] and ends[-1] == len(demand)
    assert max(prefix[b] - prefix[a] for a, b in segs) == want[1]
    assert all(any(a <= x < b for x in c) for c in covers for a, b in segs)


def test_a_vision_tower_alone_costs_its_stage():
    """Vision tower 30 B, embedding 20 B on 36 B devices: without the rule the tower takes a stage
    of its own; with embedding-first-head-last the embedding must join it, which does not fit, so
    the plan is refused (proven), by cpsat and by dp alike."""
    layers = [{"kind": "vision", "weight_bytes": 30}, {"kind": "embedding", "weight_bytes": 20},
              {"kind": "attention", "weight_bytes": 10, "kv_bytes_per_token": 1}, {"kind": "lm_head", "weight_bytes": 5}]
    spec = {"name": "hw", "device": {"memory": 36},
            "fleet": {"racks": 1, "per_rack": 4, "intra_rack_latency_us": 1, "inter_rack_latency_us": 2}}
    free = place(_instance(layers, spec, 0, ()), "dp")
    assert free.devices_used == 2 and free.assignment[0] != free.assignment[1]
    for method in ("cpsat", "dp"):
        r = place(_instance(layers, spec, 0, ("embedding-first-head-last",)), method)
        assert r.status == Status.INFEASIBLE, (method, r.message)


def test_a_head_alone_is_no_stage_under_decoder_per_stage():
    """Three 10 B layers and a 12 B head on 32 B devices: two stages fit only as [0, 1, 2] + [head]
    (32 B + 12 B) or [embedding.., 0, 1] + [2, head] (22 B each); decoder-per-stage refuses the
    first, so both methods pick a stage of layer 2 and the head."""
    layers = [{"kind": "embedding", "weight_bytes": 2}, *[{"kind": "attention", "weight_bytes": 10,
                                                          "kv_bytes_per_token": 1}] * 3,
              {"kind": "lm_head", "weight_bytes": 12}]
    spec = {"name": "hw", "device": {"memory": 32},
            "fleet": {"racks": 1, "per_rack": 3, "intra_rack_latency_us": 1, "inter_rack_latency_us": 2}}
    for method in ("cpsat", "dp"):
        r = place(_instance(layers, spec, 0, ("decoder-per-stage",)), method)
        assert r.devices_used == 2 and r.devices_proven, r.message
        head = r.assignment[-1]
        assert [i for i, d in enumerate(r.assignment) if d == head] != [4]
        assert requirement_violation(_instance(layers, spec, 0, ("decoder-per-stage",)), r.assignment) is None
    bad = _instance(layers, spec, 0, ("decoder-per-stage",))
    assert "hold no decoder layer" in requirement_violation(bad, [0, 0, 0, 0, 1])


def test_ordered_requirement_refused_in_free_mode():
    layers = [{"kind": "embedding", "weight_bytes": 2}, {"kind": "attention", "weight_bytes": 10, "kv_bytes_per_token": 1}]
    spec = {"name": "hw", "device": {"memory": 32}, "fleet": {"racks": 1, "per_rack": 2}}
    with pytest.raises(InvalidSpec) as err:
        _instance(layers, spec, 0, ("embedding-first-head-last",), mode="free")
    assert err.value.field == "require" and "pipeline order" in err.value.message


def test_every_requirement_combination_is_accepted_in_contiguous_mode():
    layers = [{"kind": "embedding", "weight_bytes": 2}, {"kind": "attention", "weight_bytes": 10, "kv_bytes_per_token": 1}]
    spec = {"name": "hw", "device": {"memory": 32}, "fleet": {"racks": 1, "per_rack": 2}}
    from placer.problem.instance import REQUIREMENTS
    for k in range(len(REQUIREMENTS) + 1):
        for combo in itertools.combinations(REQUIREMENTS, k):
            assert _instance(layers, spec, 0, combo).require == combo
