"""Sweeps: rows equal direct solves, resume after interruption, failures recorded, Pareto marks."""

from __future__ import annotations

import csv
import json
from dataclasses import replace

import pytest
import yaml
from test_plan import TINY_MODEL, toy_fleet

from placer.algorithms import place
from placer.planning.studies.sweep import (
    COLUMNS,
    Grid,
    SweepSettings,
    pareto_mask,
    read_rows,
    run_sweep,
)
from placer.problem.instance import make_instance
from placer.specs.errors import InvalidSpec
from placer.specs.model import model_from_dict
from placer.specs.workload import Workload

GRID = Grid(contexts=(10,), concurrencies=(1, 4, 6))
SETTINGS = SweepSettings(base_workload=Workload(context_tokens=10))
_TIMING = ("seconds",)


def tiny():
    return model_from_dict(TINY_MODEL)


def same(rows):
    return [{k: v for k, v in r.items() if k not in _TIMING} for r in rows]


@pytest.fixture
def count_solves(monkeypatch):
    """Counts the solves the sweep makes (by concurrency)."""
    import placer.algorithms as algorithms

    calls = []
    real = algorithms.place      # every planner's placement step (placer.planning.solve) calls it

    def counting(instance, method="cpsat", **kw):
        calls.append(instance.workload.concurrency)
        return real(instance, method, **kw)

    monkeypatch.setattr(algorithms, "place", counting)
    return calls


def test_csv_rows_equal_direct_place_calls(tmp_path):
    out = tmp_path / "r.csv"
    model, fleet = tiny(), toy_fleet()
    report = run_sweep(model, fleet, GRID, SETTINGS, out=out, jobs=1)
    rows = read_rows(out)
    assert same(rows) == same(report.rows)
    assert [r["concurrency"] for r in rows] == [1, 4, 6]
    for r in rows:
        inst = make_instance(model, fleet, Workload(context_tokens=10, concurrency=r["concurrency"]))
        direct = place(inst, method="dp")
        assert r["method"] == "dp" and r["mode"] == "contiguous"
        assert r["status"] == str(direct.status) == "optimal"
        assert r["proven_optimal"] is True and r["devices_proven"] is True
        assert r["devices_used"] == direct.devices_used
        assert r["hops"] == direct.hops
        assert r["hop_latency_us"] == pytest.approx(direct.hop_latency_us)
        assert r["concurrency_ceiling"] == direct.concurrency_ceiling
        assert r["lower_bound_devices"] == direct.lower_bound_devices
    # hand-checked (see test_plan): 1, 2 and 3 devices; hops between them at 2 us inside a rack
    assert [r["devices_used"] for r in rows] == [1, 2, 3]
    assert [r["hops"] for r in rows] == [0, 1, 2]
    assert [r["concurrency_ceiling"] for r in rows] == [3, 5, 8]


def test_header_once_and_rows_parse_back(tmp_path):
    out = tmp_path / "r.csv"
    run_sweep(tiny(), toy_fleet(), GRID, SETTINGS, out=out, jobs=1)
    with open(out, newline="") as fh:
        lines = list(csv.reader(fh))
    assert tuple(lines[0]) == COLUMNS
    assert len(lines) == 4 and all(tuple(x) != COLUMNS for x in lines[1:])


def test_resume_from_a_partial_csv_solves_only_missing_points(tmp_path, count_solves):
    out = tmp_path / "r.csv"
    full = run_sweep(tiny(), toy_fleet(), GRID, SETTINGS, out=out, jobs=1)
    assert count_solves == [1, 4, 6]
    text = out.read_text().splitlines(keepends=True)
    # keep the header and the first point, and a torn line from a write cut short
    out.write_text(text[0] + text[1] + text[2][:17])
    count_solves.clear()
    again = run_sweep(tiny(), toy_fleet(), GRID, SETTINGS, out=out, jobs=1)
    assert count_solves == [4, 6]
    assert again.solved == 2 and again.reused == 1
    assert same(read_rows(out)) == same(full.rows)
    count_solves.clear()
    run_sweep(tiny(), toy_fleet(), GRID, SETTINGS, out=out, jobs=1)
    assert count_solves == []


def test_interrupted_sweep_keeps_finished_points(tmp_path, count_solves):
    out = tmp_path / "r.csv"
    grid = Grid(contexts=(10, 20), concurrencies=(1, 2, 3))

    def stop_after_two(row, done, todo):
        if done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(tiny(), toy_fleet(), grid, SETTINGS, out=out, jobs=1, progress=stop_after_two)
    assert len(read_rows(out)) == 2
    count_solves.clear()
    report = run_sweep(tiny(), toy_fleet(), grid, SETTINGS, out=out, jobs=1)
    assert len(count_solves) == 4 and report.reused == 2
    assert len(read_rows(out)) == 6
    assert {(r["context_tokens"], r["concurrency"]) for r in read_rows(out)} == {
        (ctx, c) for ctx in (10, 20) for c in (1, 2, 3)}


def test_failures_and_infeasible_points_are_recorded(tmp_path, monkeypatch):
    import placer.algorithms as algorithms

    out = tmp_path / "r.csv"
    real = algorithms.place

    def flaky(instance, method="cpsat", **kw):
        if instance.workload.concurrency == 4:
            raise RuntimeError("solver crashed")
        return real(instance, method, **kw)

    monkeypatch.setattr(algorithms, "place", flaky)
    grid = Grid(contexts=(10,), concurrencies=(1, 4, 9))
    run_sweep(tiny(), toy_fleet(), grid, SETTINGS, out=out, jobs=1)
    rows = {r["concurrency"]: r for r in read_rows(out)}
    assert rows[1]["status"] == "optimal"
    assert rows[4]["status"] == "error" and "RuntimeError: solver crashed" in rows[4]["error"]
    assert rows[9]["status"] == "infeasible" and "largest concurrency that fits is 8" in rows[9]["error"]
    assert rows[9]["devices_used"] is None and not rows[9]["pareto"]
    # a plain re-run keeps the error; --retry-failed solves it again (the newer row wins)
    monkeypatch.setattr(algorithms, "place", real)
    assert run_sweep(tiny(), toy_fleet(), grid, SETTINGS, out=out, jobs=1).solved == 0
    report = run_sweep(tiny(), toy_fleet(), grid, replace(SETTINGS, retry_failed=True), out=out, jobs=1)
    assert report.solved == 1
    rows = {r["concurrency"]: r for r in read_rows(out)}
    assert rows[4]["status"] == "optimal" and rows[4]["devices_used"] == 2 and rows[4]["error"] is None
    assert len(read_rows(out)) == 3


def test_budget_points_bisect(tmp_path):
    grid = Grid(contexts=(10,), budgets=(1, 2, 3))
    report = run_sweep(tiny(), toy_fleet(), grid, SETTINGS, out=tmp_path / "b.csv", jobs=1)
    got = [(r["budget_devices"], r["concurrency"], r["devices_used"]) for r in report.rows]
    assert got == [(1, 3, 1), (2, 5, 2), (3, 8, 3)]
    assert all(r["proven_optimal"] for r in report.rows)
    # a re-run finds them by budget, whatever concurrency each found
    again = run_sweep(tiny(), toy_fleet(), grid, SETTINGS, out=tmp_path / "b.csv", jobs=1)
    assert again.solved == 0


def test_replicas_column(tmp_path):
    # (see test_plan) N = 6: two replicas of 3 on 1 device each; N = 10: one pipeline cannot, two of 5 on 4
    grid = Grid(contexts=(10,), concurrencies=(6, 10))
    report = run_sweep(tiny(), toy_fleet(), grid, SweepSettings(base_workload=Workload(context_tokens=10),
                                                                replicas=True), jobs=1)
    got = [(r["status"], r["devices_used"], r["replicas_best"], r["replicas_total_devices"],
            r["replicas_saving_devices"]) for r in report.rows]
    assert got == [("optimal", 3, 2, 2, 1), ("infeasible", None, 2, 4, None)]


def test_another_setup_in_the_same_file_is_refused(tmp_path):
    out = tmp_path / "r.csv"
    run_sweep(tiny(), toy_fleet(), GRID, SETTINGS, out=out, jobs=1)
    with pytest.raises(InvalidSpec, match="another model"):
        run_sweep(tiny(), toy_fleet(racks=5), GRID, SETTINGS, out=out, jobs=1)


def test_grid_order_and_precisions():
    g = Grid(contexts=(10, 20), concurrencies=(1, 2), modes=("contiguous", "free"), weight_bits=(4, 8))
    pts = g.points(Workload(kv_bits=8))
    assert len(pts) == 2 * 2 * 2 * 2
    assert {p.kv_bits for p in pts} == {8}
    assert pts[0].mode == "contiguous" and pts[-1].mode == "free"
    with pytest.raises(InvalidSpec):
        Grid(contexts=(10,), concurrencies=(1,), modes=("diagonal",))
    with pytest.raises(InvalidSpec):
        Grid(contexts=(10,))


def test_pareto_on_a_hand_made_table():
    ok = "optimal"
    rows = [
        dict(status=ok, devices_used=47, concurrency=64, context_tokens=262144),   # 0 front
        dict(status=ok, devices_used=47, concurrency=32, context_tokens=262144),   # 1 dominated by 0
        dict(status=ok, devices_used=70, concurrency=184, context_tokens=262144),  # 2 front (more requests)
        dict(status=ok, devices_used=70, concurrency=184, context_tokens=32768),   # 3 dominated by 2
        dict(status=ok, devices_used=59, concurrency=184, context_tokens=262144),  # 4 front, dominates 2
        dict(status="infeasible", devices_used=None, concurrency=512, context_tokens=262144),  # 5 never
        dict(status=ok, devices_used=47, concurrency=505, context_tokens=32768),   # 6 front (more requests)
        dict(status=ok, devices_used=47, concurrency=64, context_tokens=262144),   # 7 tie with 0: both stay
    ]
    mask = pareto_mask(rows)
    assert mask == [True, False, False, False, True, False, True, True]
    # tokens/s joins the objectives only when every placed row has it
    for r, tps in zip(rows, [10, 10, 10, 10, 10, None, 10, 12]):
        r["per_user_tokens_per_s"] = tps
    assert pareto_mask(rows) == [False, False, False, False, True, False, True, True]


@pytest.mark.slow
def test_parallel_processes_give_the_same_rows(tmp_path):
    serial = run_sweep(tiny(), toy_fleet(), GRID, SETTINGS, jobs=1)
    parallel = run_sweep(tiny(), toy_fleet(), GRID, SETTINGS, out=tmp_path / "p.csv", jobs=2)
    assert parallel.jobs == 2
    assert same(parallel.rows) == same(serial.rows)
    assert same(read_rows(tmp_path / "p.csv")) == same(serial.rows)


@pytest.mark.ray
def test_ray_backend_gives_the_same_rows(tmp_path, local_ray):
    serial = run_sweep(tiny(), toy_fleet(), GRID, SETTINGS, jobs=1)
    ray_rows = run_sweep(tiny(), toy_fleet(), GRID, SETTINGS, backend="ray", out=tmp_path / "ray.csv")
    assert same(ray_rows.rows) == same(serial.rows)
    assert local_ray.is_initialized()     # joined the running instance and left it up


def test_ray_backend_missing_is_a_clear_error(no_ray):
    with pytest.raises(InvalidSpec, match="Ray is not installed"):
        run_sweep(tiny(), toy_fleet(), GRID, SETTINGS, backend="ray")


def _spec_files(tmp_path):
    model = tmp_path / "tiny.yaml"
    model.write_text(yaml.safe_dump(TINY_MODEL))
    hw = tmp_path / "toy.yaml"
    hw.write_text(yaml.safe_dump({"name": "toy", "device": {"memory": "100 B"},
                                  "fleet": {"racks": 4, "per_rack": 2}}))
    return model, hw


def test_sweep_cli_writes_csv_and_plot(run_cli, tmp_path):
    model, hw = _spec_files(tmp_path)
    out, png = tmp_path / "r.csv", tmp_path / "f.png"
    code, stdout, err = run_cli(["sweep", model, "-H", hw, "--context", "10", "--concurrency", "1..3,",
                                 "--jobs", "1", "-o", out])
    assert code == 2 and "--concurrency" in err
    code, stdout, err = run_cli(["sweep", model, "-H", hw, "--context", "10,20", "--concurrency", "1..3",
                                 "--jobs", "1", "-o", out, "--plot", png])
    assert code == 0, err
    assert "6 solved, 0 reused" in stdout
    assert len(read_rows(out)) == 6
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, stdout, err = run_cli(["sweep", model, "-H", hw, "--context", "10,20", "--concurrency", "1..4",
                                 "--jobs", "1", "-o", out])
    assert code == 0 and "6 point(s) already in" in err and "2 solved, 6 reused" in stdout
    code, stdout, err = run_cli(["sweep", model, "-H", hw, "--context", "10", "--budget", "2", "--jobs", "1",
                                 "--json"])
    assert code == 0, err
    (row,) = json.loads(stdout)["rows"]
    assert (row["budget_devices"], row["concurrency"], row["devices_used"]) == (2, 5, 2)


def test_simulated_columns_match_the_simulator():
    sim = pytest.importorskip("placer.simulate", reason="the simulator is not installed")
    from placer.specs.fleet import fleet_from_dict

    fleet = fleet_from_dict({"name": "toy", "device": {"memory": "100 B", "memory_bandwidth": "1 GB/s",
                                                       "power": "1 kW"}, "fleet": {"racks": 4, "per_rack": 2}})
    settings = SweepSettings(simulate=True, simulate_output_tokens=8, base_workload=Workload(context_tokens=10))
    report = run_sweep(tiny(), fleet, Grid(contexts=(10,), concurrencies=(1, 4)), settings, jobs=1)
    for row in report.rows:
        c = row["concurrency"]
        inst = make_instance(tiny(), fleet, Workload(context_tokens=10, concurrency=c))
        direct = sim.simulate(inst, place(inst, method="dp").assignment,
                              sim.Traffic(requests=c, max_live=c, output_tokens=8))
        assert row["per_user_tokens_per_s"] == pytest.approx(direct.per_user_tokens_per_s, rel=1e-6)
        assert row["aggregate_tokens_per_s"] == pytest.approx(direct.aggregate_tokens_per_s, rel=1e-6)
        # per MW: aggregate over the used devices' power (1 kW each)
        assert row["tokens_per_s_per_mw"] == pytest.approx(
            row["aggregate_tokens_per_s"] / (row["devices_used"] * 1e3 / 1e6), rel=1e-4)


def test_a_solver_stopped_by_ctrl_c_is_not_recorded(tmp_path, monkeypatch):
    # CP-SAT answers Ctrl-C with its best placement so far; the sweep must stop without recording it
    import placer.algorithms as algorithms

    real = algorithms.place

    def interrupted_at_4(instance, method="dp", **kw):
        r = real(instance, method=method, **kw)
        if instance.workload.concurrency == 4:
            return r.replace(interrupted=True)
        return r

    monkeypatch.setattr(algorithms, "place", interrupted_at_4)
    out = tmp_path / "r.csv"
    with pytest.raises(KeyboardInterrupt):
        run_sweep(tiny(), toy_fleet(), GRID, SETTINGS, out=out, jobs=1)
    assert [r["concurrency"] for r in read_rows(out)] == [1]
    monkeypatch.setattr(algorithms, "place", real)
    report = run_sweep(tiny(), toy_fleet(), GRID, SETTINGS, out=out, jobs=1)
    assert report.solved == 2 and [r["devices_used"] for r in read_rows(out)] == [1, 2, 3]
