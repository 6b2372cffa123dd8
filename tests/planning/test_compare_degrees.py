"""placer compare per degree and placer sweep --tp: device counts against a brute force over
hand-computed per-rank bytes, speeds against the cost model's closed form worked by hand."""

from __future__ import annotations

import json

import pytest
from oracle import fewest_segments

from placer.planning import Placement, Requirements, SolverSettings, build_instance, place_instance
from placer.planning.studies.compare import compare_degrees
from placer.planning.studies.sweep import COLUMNS, Grid, SweepSettings, read_rows, run_sweep
from placer.specs.fleet import fleet_from_dict
from placer.specs.model import model_from_dict
from placer.specs.workload import Workload

# hidden 64, 8 query heads of 8, 2 KV heads, MLP width 128, vocabulary 256, 6 layers, 16-bit
SPEC = dict(name="tiny-gqa", hidden_size=64, vocab_size=256, num_layers=6, pattern="A*6",
            mixers={"a": {"type": "gqa", "num_heads": 8, "num_kv_heads": 2, "head_dim": 8}},
            ffns={"f": {"type": "dense", "intermediate_size": 128}},
            layer_types={"A": {"mixer": "a", "ffn": "f"}})


def _layer_params(g: int) -> int:
    """One decoder layer's parameters on one rank of a degree-g group, by hand."""
    kv_heads = 2 // g if g <= 2 else 1                       # replicated past the 2 KV heads
    q = 64 * (8 // g) * 8
    kv = 2 * 64 * kv_heads * 8
    o = (8 // g) * 8 * 64
    mlp = 3 * 64 * (128 // g)
    norms = 2 * 64
    return q + kv + o + mlp + norms


def _kv_bytes_per_token(g: int) -> int:
    return 2 * (2 // g if g <= 2 else 1) * 8 * 2              # k and v, 16-bit


EMBED = {1: 256 * 64, 2: 128 * 64, 4: 64 * 64}                # vocabulary-parallel rows
HEAD = {g: EMBED[g] + 64 for g in EMBED}                      # plus the replicated final norm


def _fleet(memory_b: int, racks=2, per_rack=4, intra_us=5, inter_us=7):
    return fleet_from_dict({"name": "gpus", "device": {
        "kind": "gpu", "memory": f"{memory_b} B", "memory_bandwidth": "1 GB/s",
        "perf": {"fixed_overhead_us_per_layer": 0, "bandwidth_efficiency": 1}},
        "fleet": {"racks": racks, "per_rack": per_rack, "intra_rack_latency_us": intra_us,
                  "inter_rack_latency_us": inter_us, "intra_rack_bandwidth": "2 GB/s",
                  "inter_rack_bandwidth": "1 GB/s"}})


def _demands(g: int, wl: Workload) -> list[int]:
    kv = wl.concurrency * wl.context_tokens * _kv_bytes_per_token(g)
    return [2 * EMBED[g]] + [2 * _layer_params(g) + kv] * 6 + [2 * HEAD[g]]


@pytest.mark.parametrize("memory_b", [60_000, 90_000, 150_000])
def test_per_degree_devices_equal_brute_force(memory_b):
    m = model_from_dict(SPEC)
    wl = Workload(context_tokens=64, concurrency=2)
    fleet = _fleet(memory_b)
    doc = compare_degrees(m, fleet, wl, Requirements(), SolverSettings(time_limit=10, threads=1), output_tokens=4)
    rows = {r["tp"]: r for r in doc["degrees"]}
    assert sorted(rows) == [1, 2, 4]                      # the divisors of 4 the 8 / 2 heads allow
    act = 2 * 1 * 64 * 2                                  # two micro-batch buffers of the 64-wide activation
    for g, row in rows.items():
        stages = fewest_segments(_demands(g, wl), memory_b - act, 2 * (4 // g))
        if stages is None:
            assert row["devices_used"] is None and row["status"] == "infeasible", row
            continue
        assert (row["devices_used"], row["stages"]) == (stages * g, stages), (g, row)
        assert row["devices_proven"]


def test_degrees_refused_with_reason_and_ep_rows_only_for_moe():
    m = model_from_dict(SPEC)
    doc = compare_degrees(m, _fleet(150_000), Workload(context_tokens=64, concurrency=2), Requirements(placement=Placement(degrees=[1, 3, 8])), SolverSettings(time_limit=5, threads=1), output_tokens=2)
    assert [r["tp"] for r in doc["degrees"]] == [1]
    assert {r["tp"]: r["reason"] for r in doc["refused"]} == {
        3: "layers.0: 8 attention heads do not divide by tp 3 (--tp 2 divides them)",
        8: "no node of gpus has 8 available devices (the largest has 4)"}
    assert all(r["ep"] == 1 for r in doc["degrees"])      # a dense model: no expert-parallel rows


def test_speeds_are_the_cost_models_closed_form_by_hand():
    """One user alone on the tp-2 plan: per token, each stage reads its rank's weights and KV at 1 GB/s
    (1000 B/us) and runs its all-reduces (ring over 2 ranks: 2 steps of 5 us + 128 B / 2 / 2000
    B/us); hops cost 7 us (between nodes) + 128 B / 1000 B/us, or 5 us + 128 / 2000 inside one."""
    m = model_from_dict(SPEC)
    wl = Workload(context_tokens=64, concurrency=2)
    fleet = _fleet(90_000)
    doc = compare_degrees(m, fleet, wl, Requirements(placement=Placement(degrees=[2])),
                          SolverSettings(time_limit=10, threads=1), output_tokens=8)
    (row,) = doc["degrees"]

    solved = place_instance(build_instance(m, fleet, wl, Requirements(), tp=2),
                            SolverSettings(time_limit=10, threads=1))
    stages = solved.mapping["stages"]
    assert row["stages"] == len(stages) and row["devices_used"] == 2 * len(stages)
    per_reduce = 2 * (5 + 128 / 2 / 2000)

    def step_us(kv_len: int) -> float:
        t = 0.0
        for st in stages:
            names = st["layers"]
            layers = [x for x in names if x.startswith("layers.")]
            # the embedding reads one 64-wide row per token; every other node all of its rank's weights
            weights = (2 * 64 * ("embedding" in names) + 2 * HEAD[2] * ("lm_head" in names)
                       + 2 * _layer_params(2) * len(layers))
            kv = _kv_bytes_per_token(2) * kv_len * len(layers)
            reduces = 2 * len(layers) + ("embedding" in names)
            t += (weights + kv) / 1000 + reduces * per_reduce
        for a, b in zip(stages, stages[1:]):
            same_node = a["rack"] == b["rack"]
            t += (5 + 128 / 2000) if same_node else (7 + 128 / 1000)
        return t

    # the request holds 64 - 8 = 56 prompt tokens; the 7 gaps between its 8 tokens are the steps
    # at KV lengths 57..63
    gaps = [step_us(56 + k) for k in range(1, 8)]
    assert row["alone_tokens_per_s"] == pytest.approx(1e6 / (sum(gaps) / len(gaps)), rel=2e-3)
    # without the all-reduces the speed would be far higher: the test tells them apart
    assert 1e6 / (sum(gaps) / len(gaps) - 13 * per_reduce) > 1.1 * row["alone_tokens_per_s"]
    assert row["live_requests"] == 2 and row["aggregate_tokens_per_s"] > row["per_user_tokens_per_s"]


def test_sweep_takes_tp_as_a_grid_flag(tmp_path):
    m = model_from_dict(SPEC)
    fleet = _fleet(90_000)
    base = Workload(context_tokens=64, concurrency=2)
    grid = Grid(contexts=(64,), concurrencies=(1, 2), tps=(1, 2, 4))
    out = tmp_path / "s.csv"
    report = run_sweep(m, fleet, grid, SweepSettings(base_workload=base, method="cpsat", time_limit=10,
                                                     solver_threads=1), out=out, jobs=1)
    got = {(r["tp"], r["concurrency"]): r for r in report.rows}
    assert sorted(got) == [(g, c) for g in (1, 2, 4) for c in (1, 2)]
    act = 2 * 64 * 2
    for (g, c), r in got.items():
        stages = fewest_segments(_demands(g, base.replace(concurrency=c)), 90_000 - act, 2 * (4 // g))
        assert r["devices_used"] == stages * g and r["lower_bound_devices"] == stages * g, (g, c, r)
    # resumable: a second run reuses every row, keyed by degree too
    again = run_sweep(m, fleet, grid, SweepSettings(base_workload=base, method="cpsat", time_limit=10,
                                                    solver_threads=1), out=out, jobs=1)
    assert again.solved == 0 and again.reused == 6
    assert "tp" in COLUMNS and [r["tp"] for r in read_rows(out)] == [1, 1, 2, 2, 4, 4]


def test_sweep_reads_a_results_file_written_before_tp(tmp_path):
    old = [c for c in COLUMNS if c != "tp"]
    path = tmp_path / "old.csv"
    row = dict.fromkeys(old, "")
    row.update(setup="x", model="m", hardware="h", method="dp", mode="contiguous", context_tokens="64",
               weight_bits="16", kv_bits="16", concurrency="2", status="optimal", devices_used="3")
    path.write_text(",".join(old) + "\n" + ",".join(row[c] for c in old) + "\n")
    (r,) = read_rows(path)
    assert r["tp"] == 1 and r["devices_used"] == 3


def test_sweep_budget_counts_devices_of_groups():
    m = model_from_dict(SPEC)
    base = Workload(context_tokens=64, concurrency=0)
    grid = Grid(contexts=(64,), budgets=(4,), tps=(2,))
    (r,) = run_sweep(m, _fleet(150_000), grid, SweepSettings(base_workload=base, method="cpsat", time_limit=10,
                                                            solver_threads=1), jobs=1).rows
    # two groups of 2: the largest concurrency whose per-rank demand fits in two stages
    act = 2 * 64 * 2

    def fits(c):
        return fewest_segments(_demands(2, base.replace(concurrency=c)), 150_000 - act, 2) is not None

    best = max(c for c in range(0, 200) if fits(c))
    assert best > 0 and not fits(best + 1)
    assert r["concurrency"] == best and r["devices_used"] <= 4 and r["devices_used"] % 2 == 0


def test_compare_cli_prints_the_degree_table(run_cli, tmp_path):
    spec = tmp_path / "tiny.json"
    spec.write_text(json.dumps(SPEC))
    hw = tmp_path / "gpus.yaml"
    hw.write_text(json.dumps({"name": "gpus", "device": {"kind": "gpu", "memory": "90000 B",
                                                          "memory_bandwidth": "1 GB/s"},
                              "fleet": {"racks": 2, "per_rack": 4}}))
    code, out, err = run_cli(["compare", str(spec), "-H", str(hw), "--context", "64", "--concurrency", "2",
                              "--degrees-only", "--time-limit", "5", "--threads", "1", "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert "rows" not in doc and [r["tp"] for r in doc["degrees"]] == [1, 2, 4]
    code, out, err = run_cli(["compare", str(spec), "-H", str(hw), "--context", "64", "--concurrency", "2",
                              "--degrees-only", "--tp", "2,3", "--time-limit", "5", "--threads", "1"])
    assert code == 0, err
    assert "tp 3 excluded: layers.0: 8 attention heads do not divide by tp 3 (--tp 2 divides them)" in out
    rows = [line.split() for line in out.splitlines() if line.startswith("  2   -")]
    assert len(rows) == 1 and rows[0][2] == f"{doc['degrees'][1]['devices_used']}*"
