"""Speed frontiers on a small hand-made model and two fleets: every point is a placement that
validates and whose simulation gives the row's figures; the Pareto sets and the comparison
sentences follow from the rows by hand."""

from __future__ import annotations

import csv

import pytest
import yaml
from frontier_toys import FAST, MODEL, SLOW

from placer.mapping.validate import validate_mapping
from placer.planning import Requirements, SolverSettings
from placer.planning.studies.frontier import COLUMNS, FrontierGrid, compare_at_speeds, pareto, speed_frontier
from placer.problem.instance import Layout, make_instance
from placer.simulate import Traffic, simulate
from placer.specs.fleet import fleet_from_dict
from placer.specs.model import model_from_dict
from placer.specs.workload import Workload

FRONTIER = FrontierGrid(speeds=(20_000, 2_000), output_tokens=8)



@pytest.fixture(scope="module")
def report():
    model = model_from_dict(MODEL)
    fleets = [fleet_from_dict(FAST), fleet_from_dict(SLOW)]
    return model, fleets, speed_frontier(model, fleets, Workload(context_tokens=1000), Requirements(),
                                         SolverSettings(method="dp"), FRONTIER, jobs=1)


def test_every_point_is_a_valid_placement_with_its_simulation(report):
    model, fleets, rep = report
    by_name = {f.name: f for f in fleets}
    assert {r["platform"] for r in rep.rows} == {"fast", "slow"}
    for r in rep.rows:
        assert r["valid"] is True
        fleet = by_name[r["platform"]]
        inst = make_instance(model, fleet, Workload(context_tokens=1000, concurrency=r["target"]))
        route = [inst.device_index[d] for d in r["route"].split()]
        from placer.mapping import build_mapping
        from placer.problem.placement import Result
        doc = build_mapping(inst, Result(method="check", mode="contiguous", status="feasible", assignment=route,
                                         devices_used=len(set(route))))
        assert validate_mapping(doc, model=model, fleet=fleet) == []
        assert len(set(route)) == r["devices"] and r["replicas"] == 8 // r["devices"]
        sim = simulate(inst, route,
                       Traffic(requests=r["live_per_replica"], max_live=r["live_per_replica"], output_tokens=8))
        assert sim.per_user_tokens_per_s == pytest.approx(r["per_user_tokens_per_s"], rel=1e-12)
        assert r["tokens_per_s_per_mw"] == pytest.approx(sim.aggregate_tokens_per_s / (sim.power_w / 1e6))
        assert r["tokens_per_s_per_device"] == pytest.approx(sim.aggregate_tokens_per_s / r["devices"])
        assert r["live_total"] == r["live_per_replica"] * r["replicas"]


def test_pareto_marks_follow_from_the_rows(report):
    _m, _f, rep = report
    for name in ("fast", "slow"):
        mine = [r for r in rep.rows if r["platform"] == name]
        keys = ("per_user_tokens_per_s", "tokens_per_s_per_mw", "tokens_per_s_per_device")
        assert any(r["pareto"] for r in mine)
        for r in mine:
            dominated = any(all(o[k] >= r[k] for k in keys) and any(o[k] > r[k] for k in keys) for o in mine)
            if r["pareto"]:
                assert not dominated
            else:       # dominated, or the same figures as a point already marked
                assert dominated or any(o is not r and all(o[k] == r[k] for k in keys) and o["pareto"] for o in mine)
    assert pareto([{"a": 1, "b": 2}, {"a": 2, "b": 1}, {"a": 1, "b": 1}, {"a": 2, "b": 1}], keys=("a", "b")) == \
        [True, True, False, False]


def test_sentences_name_the_leader_and_the_ratio(report):
    _m, _f, rep = report
    for x, text in zip((20_000, 2_000), rep.sentences):
        best = {}
        for p in ("fast", "slow"):
            ok = [r["tokens_per_s_per_mw"] for r in rep.rows if r["platform"] == p and r["per_user_tokens_per_s"] >= x]
            best[p] = max(ok) if ok else None
        lead = max((p for p in best if best[p]), key=lambda p: best[p])
        assert f"{lead} is ahead with {best[lead]:,.0f} tokens/s per MW" in text
        other = "slow" if lead == "fast" else "fast"
        if best[other]:
            assert f"{best[lead] / best[other]:.2f}x {other}" in text
        else:
            assert "short of the floor" in text
    assert compare_at_speeds(rep, (1e12,))[0].startswith("At 1,000,000,000,000 tokens/s per user no platform")


@pytest.mark.slow
def test_frontier_command_writes_the_chart_and_the_table(tmp_path, run_cli):
    (tmp_path / "small.yaml").write_text(yaml.safe_dump(MODEL))
    for hw in (FAST, SLOW):
        (tmp_path / f"{hw['name']}.yaml").write_text(yaml.safe_dump(hw))
    png, table = tmp_path / "f.png", tmp_path / "f.csv"
    code, out, err = run_cli(["frontier", tmp_path / "small.yaml", "--hardware",
                              f"{tmp_path / 'fast.yaml'},{tmp_path / 'slow.yaml'}", "--context", "1000",
                              "--speeds", "20000,2000", "--jobs", 1, "--output-tokens", 8, "-o", table,
                              "--plot", png])
    assert code == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = list(csv.DictReader(table.open()))
    assert rows and list(rows[0]) == COLUMNS and {r["platform"] for r in rows} == {"fast", "slow"}
    assert out.count("At ") >= 2 and "tokens/s per MW" in out
    assert out.splitlines()[1].startswith("workload: context 1000 (1,000 tokens), concurrency per point")
    code, out, err = run_cli(["frontier", tmp_path / "small.yaml", "--hardware", "fast", "--speeds", "x"])
    assert code == 2 and err.startswith("error: --speeds: speeds:")


def _same(rows):
    return sorted(tuple((k, r[k]) for k in sorted(r)) for r in rows)


@pytest.mark.slow
def test_frontier_points_run_in_worker_processes_with_the_same_rows(report):
    """--jobs 2 (sweep's process backend, spawned threads) gives exactly the serial rows."""
    model, fleets, rep = report
    two = speed_frontier(model, fleets, Workload(context_tokens=1000), Requirements(), SolverSettings(method="dp"),
                         FRONTIER, jobs=2, backend="process")
    assert len(two.rows) == len(rep.rows) > 2 and _same(two.rows) == _same(rep.rows)
    assert two.sentences == rep.sentences


@pytest.mark.ray
def test_frontier_ray_backend_gives_the_same_rows(report, local_ray):
    model, fleets, rep = report
    ray_rep = speed_frontier(model, fleets, Workload(context_tokens=1000), Requirements(), SolverSettings(method="dp"),
                             FRONTIER, backend="ray")
    assert _same(ray_rep.rows) == _same(rep.rows)
    assert local_ray.is_initialized()     # joined the running instance and left it up


def test_frontier_ray_backend_missing_is_one_line_and_writes_nothing(tmp_path, run_cli, no_ray):
    (tmp_path / "small.yaml").write_text(yaml.safe_dump(MODEL))
    (tmp_path / "fast.yaml").write_text(yaml.safe_dump(FAST))
    code, out, err = run_cli(["frontier", tmp_path / "small.yaml", "-H", tmp_path / "fast.yaml", "--backend", "ray",
                              "-o", tmp_path / "f.csv", "--plot", tmp_path / "f.png"])
    assert code == 2
    assert err == ("error: --backend: backend: Ray is not installed; install the extra with pip install "
                   "'placer[ray]' or use --backend process\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fast.yaml", "small.yaml"]
    code, out, err = run_cli(["frontier", tmp_path / "small.yaml", "-H", "fast", "--backend", "dask"])
    assert code == 2 and "--backend" in err and "dask" in err


# A small model with head and width dimensions, so tensor parallelism applies: 8 query heads, 4 KV
# heads, MLP width 1,024 (degrees 1, 2 and 4 divide them all); nodes of 4 GPUs joined by NVLink-like links.
TP_MODEL = {"name": "small-tp", "hidden_size": 512, "vocab_size": 2048, "tie_word_embeddings": False,
            "num_layers": 4, "pattern": "A*4",
            "mixers": {"attention": {"type": "gqa", "num_heads": 8, "num_kv_heads": 4, "head_dim": 64}},
            "ffns": {"mlp": {"type": "dense", "intermediate_size": 1024}},
            "layer_types": {"A": {"mixer": "attention", "ffn": "mlp"}}}
INTRA_US, INTRA_BW = 3.0, 100e9           # one link inside a node: 3 us, 100 GB/s per direction


def _gpu(intra_us, intra_bw):
    return fleet_from_dict(_gpu_spec(intra_us, intra_bw))


def _gpu_spec(intra_us, intra_bw):
    hw = {"name": "gpu4", "device": {"memory": "8 MB", "memory_bandwidth": "2 TB/s", "compute": "100 TFLOPS",
                                     "power": "700 W", "kind": "gpu",
                                     "perf": {"fixed_overhead_us_per_layer": 5.0, "bandwidth_efficiency": 0.8,
                                              "compute_efficiency": 0.8}},
          "fleet": {"racks": 3, "per_rack": 4, "intra_rack_latency_us": intra_us, "inter_rack_latency_us": 6,
                    "inter_rack_bandwidth": "50 GB/s"}}
    if intra_bw:
        hw["fleet"]["intra_rack_bandwidth"] = f"{intra_bw / 1e9:g} GB/s"
    return hw


@pytest.fixture(scope="module")
def tp_report():
    model = model_from_dict(TP_MODEL)
    fleet = _gpu(INTRA_US, INTRA_BW)
    return model, fleet, speed_frontier(model, [fleet], Workload(context_tokens=256), Requirements(),
                                        SolverSettings(method="dp"), FrontierGrid(speeds=(100,), output_tokens=8),
                                        jobs=1)


def _route_instance(model, fleet, r):
    from placer.mapping import build_mapping
    from placer.problem.placement import Result
    from placer.problem.reductions.tensor_parallel import per_device

    inst = make_instance(model, fleet, Workload(context_tokens=256, concurrency=r["target"]), layout=Layout(tp=r["tp"], ep=r["ep"]))
    route = [inst.device_index[d] for d in r["route"].split()]
    groups = len(set(route))
    doc = build_mapping(inst, per_device(Result(method="check", mode="contiguous", status="feasible",
                                                assignment=route, devices_used=groups), r["tp"]))
    return inst, route, doc


def test_frontier_points_per_degree_are_validated_mappings(tp_report, tmp_path):
    model, fleet, rep = tp_report
    assert {r["tp"] for r in rep.rows} == {1, 2, 4}                  # the node-size divisors the heads allow
    for r in rep.rows:
        inst, route, doc = _route_instance(model, fleet, r)
        assert r["valid"] is True and validate_mapping(doc, model=model, fleet=fleet) == []
        assert {s.get("group", {}).get("tp", 1) for s in doc["stages"]} == {r["tp"]}
        assert r["devices"] == len(set(route)) * r["tp"] == doc["summary"]["devices_used"]
        assert r["replicas"] == (12 // r["tp"]) // len(set(route))   # groups of tp the 3 nodes form
        sim = simulate(inst, route,
                       Traffic(requests=r["live_per_replica"], max_live=r["live_per_replica"], output_tokens=8))
        assert sim.per_user_tokens_per_s == pytest.approx(r["per_user_tokens_per_s"], rel=1e-12)
        assert sim.power_w == pytest.approx(700.0 * r["devices"])    # every member of every group draws power
        assert r["tokens_per_s_per_device"] == pytest.approx(sim.aggregate_tokens_per_s / r["devices"])
    path = tmp_path / "points.csv"
    from placer.planning.studies.frontier import write_csv

    write_csv(path, rep.rows)
    assert sorted({int(x["tp"]) for x in csv.DictReader(path.open())}) == [1, 2, 4]


def test_a_tensor_parallel_point_pays_its_all_reduces(tp_report):
    """A tp 4 point of one request: its per-token time minus the same mapping's on links of no cost
    is the ring all-reduces of the cost model's formula, by hand: per layer two (attention output,
    MLP down) and one for the embedding, each 2 (g - 1) x (latency + bytes / g / bandwidth) with
    the hidden state's bytes (512 x 2) and the node's link."""
    model, fleet, rep = tp_report
    row = next(r for r in rep.rows if r["tp"] == 4 and r["live_per_replica"] == 1)
    _inst, _route, doc = _route_instance(model, fleet, row)
    g, hidden_bytes = 4, 512 * 2
    per_reduce_us = 2 * (g - 1) * (INTRA_US + hidden_bytes / g / (INTRA_BW / 1e6))
    reduces = sum(2 if name.startswith("layers.") else 1 if name == "embedding" else 0
                  for s in doc["stages"] for name in s["layers"])
    assert reduces == 2 * 4 + 1
    free = _gpu(0.0, None)                       # the same fleet, intra-node links of no cost
    from placer.simulate import simulate_mapping

    with_links = simulate_mapping(doc, model=model, hardware=fleet, requests=1, output_tokens=8)
    without = simulate_mapping(doc, model=model, hardware=free, requests=1, output_tokens=8)
    assert with_links.itl_p50_us == pytest.approx(row["itl_p50_us"], rel=1e-12)
    assert with_links.itl_p50_us - without.itl_p50_us == pytest.approx(reduces * per_reduce_us, rel=1e-9)


def test_frontier_command_degrees_and_reserve(tmp_path, run_cli):
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(TP_MODEL))
    (tmp_path / "g.yaml").write_text(yaml.safe_dump(_gpu_spec(INTRA_US, INTRA_BW)))
    table = tmp_path / "f.csv"
    code, out, err = run_cli(["frontier", tmp_path / "m.yaml", "-H", tmp_path / "g.yaml", "--context", "256",
                              "--speeds", "100", "--jobs", 1, "--output-tokens", 8, "--tp", "1,2,3",
                              "--reserve", "1 MB", "--max-target", 2, "-o", table, "--plot", tmp_path / "f.png"])
    assert code == 0, err
    rows = list(csv.DictReader(table.open()))
    assert {r["tp"] for r in rows} == {"1", "2"} and {int(r["target"]) for r in rows} <= {1, 2}
    assert "not searched: tp 3 (layers.0: 8 attention heads do not divide by tp 3 (--tp 2 divides them))" in out
    assert "runtime reserve 1.00 MB per device (--reserve)" in out
