"""Per-stage tensor-parallel degrees on mixed fleets: CP-SAT against a brute force of its own, the
mapping and validator, the exporters' refusals, the command line."""

from __future__ import annotations

import itertools
import json
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placer.mapping.validate import validate_mapping
from placer.planning import Placement, Requirements, SolverSettings, Targets, search_layouts
from placer.planning.stage_degrees import solve_per_stage
from placer.problem.placement import Status
from placer.specs.errors import InvalidSpec
from placer.specs.fleet import fleet_from_dict
from placer.specs.model import model_from_dict
from placer.specs.workload import Workload

# ----------------------------------------------------------------------------- an independent brute force
# Toy models are GQA attention + a dense MLP per decoder layer, an untied embedding and LM head,
# 16-bit weights, KV and activations. The rules, written here again from the runtime's sharding:
# q and o split by query heads, k and v by KV heads (one whole head per rank once g > n_kv),
# the MLP by its width, the two norms of a layer replicated; embedding and head by vocabulary rows
# (ceil(V / g)), the final norm replicated; per-rank capacity = memory - reserve - activation
# buffers (one input and one output micro-batch of hidden-size activations).


def _spec(h, nq, nkv, dh, width, vocab, layers):
    return dict(name="toy", hidden_size=h, vocab_size=vocab, num_layers=layers, pattern=f"A*{layers}",
                mixers={"a": {"type": "gqa", "num_heads": nq, "num_kv_heads": nkv, "head_dim": dh}},
                ffns={"f": {"type": "dense", "intermediate_size": width}},
                layer_types={"A": {"mixer": "a", "ffn": "f"}})


def _degree_ok(spec, g):
    nq, nkv = spec["mixers"]["a"]["num_heads"], spec["mixers"]["a"]["num_kv_heads"]
    width = spec["ffns"]["f"]["intermediate_size"]
    kv_ok = nkv % g == 0 if g <= nkv else g % nkv == 0
    return nq % g == 0 and kv_ok and width % g == 0


def _rank_bytes(spec, g, context):
    """(weight bytes, bytes per live request) per node at degree g: embedding, layers, head."""
    h, vocab = spec["hidden_size"], spec["vocab_size"]
    mix = spec["mixers"]["a"]
    nq, nkv, dh = mix["num_heads"], mix["num_kv_heads"], mix["head_dim"]
    width = spec["ffns"]["f"]["intermediate_size"]
    rows = -(-vocab // g)
    kv_heads = max(1, nkv // g)
    layer = h * (nq // g) * dh + 2 * h * kv_heads * dh + (nq // g) * dh * h + 3 * h * (width // g) + 2 * h
    kv_per_token = 2 * kv_heads * dh * 2
    out = [(rows * h * 2, 0)]
    out += [(layer * 2, kv_per_token * context)] * spec["num_layers"]
    out.append(((rows * h + h) * 2, 0))
    return out


def _brute(spec, fleet_spec, degrees, c, context):
    """The lexicographic optimum (fewest devices, then the largest smallest-stage ceiling, then the
    least hop latency) over every split of the node chain and every (degree, node) per stage."""
    types = fleet_spec["device_types"]
    f = fleet_spec["fleet"]
    gone = set(f.get("unavailable", ()))
    nodes = []      # (type, available devices)
    rack = 0
    for grp in f["groups"]:
        for _ in range(grp["racks"]):
            size = sum(1 for s in range(grp["per_rack"]) if f"r{rack}g{s}" not in gone)
            nodes.append((grp["device"], size))
            rack += 1
    act = 2 * spec["hidden_size"] * 2

    def capacity(t):
        mem = types[t]["memory"]
        frac = Fraction(types[t].get("reserve", "0"))
        reserve = -(-frac.numerator * mem // frac.denominator)
        return mem - reserve - act

    extra = {frozenset((0, 1)): Fraction(str(f["pair_latency"]))} if f.get("pair_latency") is not None else {}

    def latency(u, v):
        if u == v:
            return Fraction(str(f["intra_rack_latency_us"]))
        inter = Fraction(str(f["inter_rack_latency_us"]))
        return min(inter, extra.get(frozenset((u, v)), inter))

    ok = [g for g in degrees if _degree_ok(spec, g)]
    per = {g: _rank_bytes(spec, g, context) for g in ok}
    n = spec["num_layers"] + 2
    best = None
    for mask in range(1 << (n - 1)):
        cuts = [0] + [i + 1 for i in range(n - 1) if mask >> i & 1] + [n]
        ranges = list(zip(cuts, cuts[1:]))
        options = []
        for a, b in ranges:
            opts = []
            for g in ok:
                w = sum(x[0] for x in per[g][a:b])
                r = sum(x[1] for x in per[g][a:b])
                for u, (t, size) in enumerate(nodes):
                    cap = capacity(t)
                    if g <= size and w + c * r <= cap:
                        opts.append((g, u, None if r == 0 else (cap - w) // r))
            options.append(opts)
        for combo in itertools.product(*options):
            use = [0] * len(nodes)
            for g, u, _ in combo:
                use[u] += g
            if any(use[u] > nodes[u][1] for u in range(len(nodes))):
                continue
            devices = sum(g for g, _, _ in combo)
            finite = [x for _, _, x in combo if x is not None]
            conc = min(finite) if finite else None
            lat = sum((latency(p[1], q[1]) for p, q in zip(combo, combo[1:])), Fraction(0))
            key = (devices, -(conc if conc is not None else 10**18), lat)
            if best is None or key < best:
                best = key
    return best


@st.composite
def _mixed(draw):
    h = draw(st.sampled_from([32, 64]))
    nq = draw(st.sampled_from([4, 8]))
    nkv = draw(st.sampled_from([k for k in (1, 2, 4) if nq % k == 0]))
    layers = draw(st.integers(2, 3))
    spec = _spec(h, nq, nkv, 8, draw(st.sampled_from([48, 64, 96])), draw(st.sampled_from([100, 128])), layers)
    context = draw(st.sampled_from([16, 64]))
    c = draw(st.integers(0, 3))
    one = _rank_bytes(spec, 1, context)[1]
    unit = one[0] + c * one[1]
    kinds = draw(st.integers(2, 3))
    types, groups = {}, []
    for k in range(kinds):
        name = f"t{k}"
        mem = draw(st.integers(unit // 3, 2 * unit)) + 2 * h * 2
        types[name] = {"kind": "gpu", "memory": mem, "reserve": draw(st.sampled_from(["0", "0.1"]))}
        groups.append({"device": name, "racks": 1, "per_rack": draw(st.sampled_from([2, 4, 8]))})
    fleet = {"intra_rack_latency_us": draw(st.sampled_from([1, 2])), "inter_rack_latency_us": 4,
             "inter_rack_topology": "full", "groups": groups}
    if draw(st.booleans()):
        fleet["unavailable"] = ["r0g1"]
    pair = draw(st.sampled_from([None, 2.5]))
    spec_fleet = {"name": "mix", "device_types": types, "fleet": dict(fleet)}
    if pair is not None:
        # every device pair of nodes 0 and 1 linked at another latency: node pairs differ
        size0, size1 = groups[0]["per_rack"], groups[1]["per_rack"]
        spec_fleet["fleet"]["extra_links"] = [{"a": f"r0g{i}", "b": f"r1g{j}", "latency_us": pair}
                                              for i in range(size0) for j in range(size1)]
        fleet["pair_latency"] = pair
    return spec, spec_fleet, fleet, c, context


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mixed())
def test_per_stage_cpsat_equals_brute_force(case):
    spec, spec_fleet, oracle_fleet, c, context = case
    want = _brute(spec, {"device_types": spec_fleet["device_types"], "fleet": oracle_fleet}, (1, 2, 4), c, context)
    m = model_from_dict(spec)
    fleet = fleet_from_dict(spec_fleet)
    wl = Workload(context_tokens=context, concurrency=c)
    degrees = [g for g in (1, 2, 4) if _degree_ok(spec, g)]
    s = solve_per_stage(m, fleet, wl, Requirements(placement=Placement(degrees=degrees)),
                        SolverSettings(time_limit=20, threads=1))
    r = s.result
    if want is None:
        assert r.status == Status.INFEASIBLE
        return
    devices, neg_conc, lat = want
    assert r.feasible and r.status == Status.OPTIMAL, r.message
    assert r.devices_used == devices
    conc = r.level("concurrency")
    if neg_conc != -10**18:
        assert conc is not None and conc.value == -neg_conc and conc.proven
    assert r.level("latency").proven
    assert Fraction(repr(r.hop_latency_us)) == lat
    assert validate_mapping(s.mapping, model=m, fleet=fleet) == []


# ----------------------------------------------------------------------------- a plan that needs two degrees
def _two_types():
    """Node 0: one GPU that holds the embedding and two decoder layers; node 1: four GPUs of 3/4 of
    a decoder layer each (no layer fits one of them at tp 1, two fit a group of 4, one with the
    head a group of 2). Every uniform degree fails (tp 1: node 1 holds nothing; tp 2 and 4: node 0
    forms no group); a stage at tp 1 and the rest at tp 2 or 4 takes 5 GPUs."""
    spec = _spec(64, 4, 4, 16, 128, 128, 4)
    per1 = _rank_bytes(spec, 1, 16)
    layer = per1[1][0] + per1[1][1]
    act = 2 * 64 * 2
    types = {"big": {"kind": "gpu", "memory": 2 * layer + per1[0][0] + act, "memory_bandwidth": "2 TB/s"},
             "small": {"kind": "gpu", "memory": layer * 3 // 4 + act, "memory_bandwidth": "1 TB/s"}}
    fleet = {"name": "two", "device_types": types,
             "fleet": {"groups": [{"device": "big", "racks": 1, "per_rack": 1},
                                  {"device": "small", "racks": 1, "per_rack": 4}],
                       "intra_rack_latency_us": 2, "inter_rack_latency_us": 4}}
    return spec, fleet


def test_two_degrees_beat_every_uniform_degree():

    spec, fleet_spec = _two_types()
    m, fleet = model_from_dict(spec), fleet_from_dict(fleet_spec)
    wl = Workload(context_tokens=16, concurrency=1)
    s = solve_per_stage(m, fleet, wl, Requirements(placement=Placement(degrees=[1, 2, 4])),
                        SolverSettings(time_limit=20, threads=1))
    want = _brute(spec, {"device_types": fleet_spec["device_types"], "fleet": fleet_spec["fleet"]}, (1, 2, 4), 1, 16)
    assert s.result.devices_used == want[0] == 5 and s.result.proven_optimal
    degrees = sorted({st["group"]["tp"] for st in s.mapping["stages"]})
    assert len(degrees) > 1 and s.mapping["parallel"]["per_stage"] is True
    assert s.mapping["summary"]["devices_used"] == sum(st["group"]["tp"] for st in s.mapping["stages"])
    uniform = search_layouts(m, fleet, wl, Requirements(placement=Placement(degrees=[1, 2, 4], attention_dp=False), targets=Targets(objective="lex")), SolverSettings(time_limit=20, threads=1))
    assert all(not x.result.feasible for x in uniform.solved)
    assert validate_mapping(s.mapping, model=m, fleet=fleet) == []
    # the validator recomputes every stage at its own degree: a stage's degree changed is caught
    bad = json.loads(json.dumps(s.mapping))
    k = next(i for i, st in enumerate(bad["stages"]) if st["group"]["tp"] > 1)
    bad["stages"][k]["group"]["tp"] = 1
    kinds = {v.kind for v in validate_mapping(bad, model=m, fleet=fleet)}
    assert "group_mismatch" in kinds


def test_per_stage_mapping_runs_through_the_pipeline(tmp_path):
    from placer.export import export_mapping
    from placer.export.stages import ExportRefused
    from placer.mapping import instance_from_mapping
    from placer.simulate.des import simulate_mapping

    spec, fleet_spec = _two_types()
    m, fleet = model_from_dict(spec), fleet_from_dict(fleet_spec)
    wl = Workload(context_tokens=16, concurrency=1)
    s = solve_per_stage(m, fleet, wl, Requirements(placement=Placement(degrees=[1, 2, 4])),
                        SolverSettings(time_limit=20, threads=1))
    doc = s.mapping
    _, _, _, inst = instance_from_mapping(doc, model=m, hardware=fleet)
    assert inst.weight_bytes == s.instance.weight_bytes and [len(inst.members(d)) for d in range(inst.n_devices)] \
        == [st["group"]["tp"] for st in doc["stages"]]
    sim = simulate_mapping(doc, model=m, hardware=fleet)
    assert sim.stages == [st["device"] for st in doc["stages"]] and sim.per_user_tokens_per_s > 0
    with pytest.raises(ExportRefused, match="vllm-project/vllm#27239"):
        export_mapping(doc, "vllm", model=m, fleet=fleet)
    with pytest.raises(ExportRefused, match="one --tp-size for every pipeline rank"):
        export_mapping(doc, "sglang", model=m, fleet=fleet)
    with pytest.raises(ExportRefused, match="one --tensor-model-parallel-size"):
        export_mapping(doc, "megatron", model=m, fleet=fleet)
    with pytest.raises(ExportRefused, match="one process per stage"):
        export_mapping(doc, "torch", model=m, fleet=fleet)


def test_fleets_and_requests_per_stage_degrees_refuse():
    spec, fleet_spec = _two_types()
    m = model_from_dict(spec)
    wl = Workload(context_tokens=16, concurrency=1)
    ring = json.loads(json.dumps(fleet_spec))
    ring["fleet"]["inter_rack_topology"] = "ring"
    with pytest.raises(InvalidSpec, match="not all linked alike"):
        solve_per_stage(m, fleet_from_dict(ring), wl, Requirements(placement=Placement(degrees=[1, 2])),
                        SolverSettings(time_limit=5, threads=1))
    fleet = fleet_from_dict(fleet_spec)
    with pytest.raises(InvalidSpec, match="contiguous"):
        solve_per_stage(m, fleet, wl, Requirements(placement=Placement(mode="free")),
                        SolverSettings(time_limit=5, threads=1))
    with pytest.raises(InvalidSpec, match="pins"):
        solve_per_stage(m, fleet, wl, Requirements(placement=Placement(pins=("0=r0g0",))),
                        SolverSettings(time_limit=5, threads=1))
    with pytest.raises(InvalidSpec, match="bottleneck"):
        solve_per_stage(m, fleet, wl, Requirements(targets=Targets(objective="lex3")),
                        SolverSettings(time_limit=5, threads=1))
    with pytest.raises(InvalidSpec, match="none of the degrees"):
        solve_per_stage(m, fleet, wl, Requirements(placement=Placement(degrees=[3])),
                        SolverSettings(time_limit=5, threads=1))


def test_cli_per_stage_tp(tmp_path, run_cli):
    import yaml

    spec, fleet_spec = _two_types()
    model_path, fleet_path = tmp_path / "toy.yaml", tmp_path / "two.yaml"
    model_path.write_text(yaml.safe_dump(spec))
    fleet_path.write_text(yaml.safe_dump(fleet_spec))
    out_path = tmp_path / "plan.json"
    code, out, err = run_cli(["solve", model_path, "-H", fleet_path, "--context", "16", "--concurrency", "1",
                              "--per-stage-tp", "--tp", "1,2,4", "-q", "-o", out_path])
    assert code == 0, err
    doc = json.loads(out_path.read_text())
    assert doc["parallel"]["per_stage"] is True and doc["summary"]["devices_used"] == 5
    assert "devices 5 (lower bound 5)" in out and "status optimal (proven)" in out
    assert run_cli(["validate", out_path, "--model", model_path, "--hardware", fleet_path])[0] == 0
    code, _, err = run_cli(["export", out_path, "--format", "vllm", "--model", model_path, "--hardware", fleet_path])
    assert code == 2 and "vllm-project/vllm#27239" in err and len(err.strip().splitlines()) == 1
    code, _, err = run_cli(["solve", model_path, "-H", fleet_path, "--per-stage-tp", "--mode", "free", "-q"])
    assert code == 2 and err.startswith("error: --mode: mode:") and "Traceback" not in err
