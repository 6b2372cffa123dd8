"""Every study figure carries its traffic, its calibrated error band and its price: the frontier's,
the per-degree table's, the sweep's and the recommendation's rows; $/million tokens of a fleet
of several device types at different prices (each device at its type's price, by hand); the
disaggregated frontier's prompt is the traffic's, not the context less the output."""

from __future__ import annotations

import csv
import json

import pytest
from disagg_toys import MODEL

from placer.planning import Requirements, SolverSettings
from placer.planning.price import placement_price, price_line, usd_per_million_tokens
from placer.planning.studies.frontier import COLUMNS, FrontierGrid, speed_frontier
from placer.planning.studies.frontier_disagg import disagg_points, traffic_prompt
from placer.planning.studies.sweep import COLUMNS as SWEEP_COLUMNS
from placer.planning.studies.sweep import read_rows
from placer.problem.instance import make_instance
from placer.simulate import Traffic
from placer.simulate.error_band import error_band
from placer.specs.fleet import load_fleet
from placer.specs.model import load_model
from placer.specs.workload import Workload, workload_for

# two device types at different prices: $2 per device-hour, and $12 per system-hour of 4 devices
# ($3 per device-hour); one device of each, each holding half of the toy's 4 GB of weights
PRICED = """\
name: priced
device_types:
  cheap: {kind: gpu, memory: 3 GB, memory_bandwidth: 2 TB/s, compute: 400 TFLOPS, power: 500 W, perf: {},
          price: {device_hour: 2.0, source: test figure, date: "2026-01-01", assumption: true}}
  dear: {kind: gpu, memory: 3 GB, memory_bandwidth: 4 TB/s, compute: 200 TFLOPS, power: 800 W, perf: {},
         devices_per_system: 4,
         price: {system_hour: 12.0, source: test figure, date: "2026-01-01", assumption: true}}
fleet:
  groups:
    - {device: cheap, racks: 1, per_rack: 1}
    - {device: dear, racks: 1, per_rack: 1}
  intra_rack_latency_us: 2
  inter_rack_latency_us: 5
  intra_rack_bandwidth: 400 GB/s
  inter_rack_bandwidth: 100 GB/s
"""
H100_HOUR = 39.33 / 8           # the h100 spec's price: $39.33 per system-hour of 8 GPUs


@pytest.fixture(scope="module")
def priced(tmp_path_factory):
    d = tmp_path_factory.mktemp("priced")
    (d / "model.yaml").write_text(MODEL)
    (d / "priced.yaml").write_text(PRICED)
    return load_model(d / "model.yaml"), load_fleet(d / "priced.yaml")


def test_a_mixed_price_fleet_prices_each_device_by_its_type(priced):
    model, fleet = priced
    inst = make_instance(model, fleet, Workload(context_tokens=1000, concurrency=1))
    kinds = [d.type.name for d in inst.devices]
    both = [kinds.index("cheap")] * 2 + [kinds.index("dear")] * 2
    price, source = placement_price(inst, both)
    assert price == pytest.approx(2.0 + 3.0)            # $2 + $12 / 4 per hour
    assert source == "cheap: $2 per device-hour: test figure, 2026-01-01 (assumption); " \
                     "dear: $12 per system-hour of 4 devices: test figure, 2026-01-01 (assumption)"
    assert placement_price(inst, [kinds.index("dear")] * 4)[0] == pytest.approx(3.0)
    # $5 an hour over 1,000 tokens/s (3.6 M tokens an hour): 5 / 3.6 = $1.3889 per million tokens
    assert usd_per_million_tokens(price, 1000.0) == pytest.approx(5 / 3.6)
    assert "priced each device at its type's price (cheap $2 per device-hour" in price_line([fleet])
    # the error band names the device types a run uses, not every type of the fleet
    assert error_band(inst, 1, 100) == "outside the calibrated range (device cheap, dear never measured)"
    assert error_band(inst, 1, 100, used=[kinds.index("dear")]) == \
        "outside the calibrated range (device dear never measured)"


def test_a_frontier_on_a_mixed_price_fleet_prices_both_types(priced, tmp_path):
    model, fleet = priced
    rep = speed_frontier(model, [fleet], Workload(context_tokens=1000), Requirements(), SolverSettings(method="dp"),
                         FrontierGrid(speeds=(1.0,), output_tokens=8), jobs=1)
    assert rep.rows
    for r in rep.rows:      # 4 GB of weights need both 3 GB devices: $5 an hour for one replica
        assert r["devices"] == 2 and r["replicas"] == 1
        assert r["usd_per_million_tokens"] == pytest.approx(5.0 / (r["aggregate_tokens_per_s"] * 3600) * 1e6)
        assert r["price_source"].startswith("cheap: $2 per device-hour")
        assert r["error_band"] == "outside the calibrated range (device cheap, dear never measured)"
        assert r["traffic"].endswith("each a 992-token prompt (0 cached) then 8 output tokens")
    from placer.planning.studies.frontier import write_csv

    write_csv(tmp_path / "f.csv", rep.rows)
    with open(tmp_path / "f.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == COLUMNS and {"traffic", "error_band", "usd_per_million_tokens", "price_source"} <= set(COLUMNS)
    assert float(rows[0]["usd_per_million_tokens"]) == pytest.approx(rep.rows[0]["usd_per_million_tokens"])


def test_the_disaggregated_frontier_plans_for_the_traffics_prompt(priced, monkeypatch):
    """A 2,000-token prompt in an 8,000-token context: the pools are planned for 2,000 prompt
    tokens (the traffic's), not the 7,800 of the context less the output."""
    import placer.planning.disagg as disagg

    model, fleet = priced
    wl = Workload(context_tokens=8000)
    traffic = Traffic(prompt_tokens=2000, output_tokens=200)
    assert traffic_prompt(model, wl, Requirements(traffic=traffic), 200) == 2000
    # no traffic: the standard 8k prompt, cut to fit the context less the output
    assert traffic_prompt(model, wl, Requirements(), 200) == 7800
    assert traffic_prompt(model, Workload(context_tokens=20000), Requirements(), 200) == 8192
    asked = []

    class Nothing:
        chosen, message = None, "none"

    def plan_disagg(model, fleet, workload, want, solver):
        asked.append((want.pools.prompt_tokens, want.pools.decode_tokens))
        return Nothing()

    monkeypatch.setattr(disagg, "plan_disagg", plan_disagg)
    grid = FrontierGrid(speeds=(100.0,), output_tokens=200, max_ttft_ms=500, disagg=True)
    rows, notes = disagg_points(model, [fleet], wl, Requirements(traffic=traffic), SolverSettings(), grid)
    assert asked == [(2000, 200)] and rows == [] and notes == ["priced disagg at 100 tokens/s per user: none"]


def test_compare_degrees_rows_carry_their_runs_error_bands(run_cli):
    code, out, err = run_cli(["compare", "llama-3.1-8b", "-H", "h100", "--racks", 1, "--context", "2k",
                              "--concurrency", 4, "--isl", 1536, "--osl", 64, "--tp", "1,8", "--degrees-only",
                              "--time-limit", 10, "--threads", 1, "-q", "--json"])
    assert code == 0, err
    doc = json.loads(out)
    model = load_model("llama-3.1-8b")
    inst = make_instance(model, load_fleet("h100", racks=1), workload_for(model, context="2k", concurrency=4))
    dense_small = error_band(inst, 4, 1600)           # the band of GPU dense models at batch 1-8
    assert "gpu dense, batch 1-8" in dense_small
    rows = {r["tp"]: r for r in doc["degrees"]}
    assert set(rows) == {1, 8}
    for r in rows.values():     # tp 8 too: the band is the whole 8B model's, not its shard's
        assert r["live_requests"] == 4
        assert r["error_band"] == dense_small and r["alone_error_band"] == dense_small
    code, text, err = run_cli(["compare", "llama-3.1-8b", "-H", "h100", "--racks", 1, "--context", "2k",
                               "--concurrency", 4, "--isl", 1536, "--osl", 64, "--tp", "1,8", "--degrees-only",
                               "--time-limit", 10, "--threads", 1, "-q"])
    assert code == 0, err
    assert f"speeds: {dense_small}" in text.splitlines()
    assert "each a 1,536-token prompt (0 cached) then 64 output tokens" in text


def test_sweep_rows_carry_traffic_band_and_price(run_cli, tmp_path):
    out = tmp_path / "s.csv"
    code, text, err = run_cli(["sweep", "llama-3.1-8b", "-H", "h100", "--context", "8k", "--concurrency", 2,
                               "--isl", "4k", "--osl", 256, "--simulate", "-j", 1, "-q", "-o", out])
    assert code == 0, err
    (r,) = read_rows(out)
    assert r["traffic"] == ("closed loop of 2 live requests (6 requests: at least 3 per user), "
                            "each a 4,096-token prompt (0 cached) then 256 output tokens")
    assert r["usd_per_million_tokens"] == pytest.approx(H100_HOUR / (r["aggregate_tokens_per_s"] * 3600) * 1e6,
                                                        rel=1e-3)
    assert r["price_source"].startswith("h100: $39.33 per system-hour of 8 devices: AWS EC2")
    assert r["error_band"].startswith("calibrated error ±") and "gpu dense, batch 1-8" in r["error_band"]
    assert f"speeds: {r['error_band']}" in text.splitlines()
    # a results file of the version before these columns reads back, the new columns empty
    old = [c for c in SWEEP_COLUMNS if c not in ("traffic", "error_band", "usd_per_million_tokens", "price_source")]
    with open(out) as fh:
        full = list(csv.DictReader(fh))
    legacy = tmp_path / "old.csv"
    with open(legacy, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=old, extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        w.writerows(full)
    (back,) = read_rows(legacy)
    assert back["devices_used"] == r["devices_used"] and back["traffic"] is None and back["error_band"] is None


@pytest.mark.slow
def test_plan_rate_rows_carry_their_runs_error_bands(run_cli, tmp_path):
    """``placer plan --rate``: each answer's TPOT band is its decode run's, the disaggregated
    answer's TTFT band its prefill replica's run's (the library plan for the same traffic)."""
    from disagg_toys import MIXED

    from placer.planning import Pools, Targets, plan

    (tmp_path / "model.yaml").write_text(MODEL)
    (tmp_path / "mixed.yaml").write_text(MIXED)
    args = ["plan", tmp_path / "model.yaml", "-H", tmp_path / "mixed.yaml", "--context", 2000, "--rate", 80,
            "--max-ttft-ms", 100, "--max-itl-ms", 5, "--isl", 2000, "--osl", 200, "--prefill-hardware", "pgpu",
            "--time-limit", 10, "-q"]
    code, out, err = run_cli([*args, "--json"])
    assert code == 0, err
    rows = {r["serving"]: r for r in json.loads(out)["rows"]}
    m = load_model(tmp_path / "model.yaml")
    p = plan(m, load_fleet(tmp_path / "mixed.yaml"), workload_for(m, context=2000),
             Requirements(targets=Targets(max_ttft_ms=100.0, max_itl_ms=5.0),
                          pools=Pools(prefill_fleet="pgpu", rate=80.0, prompt_tokens=2000, decode_tokens=200)),
             SolverSettings(time_limit=10), traffic=Traffic(prompt_tokens=2000, output_tokens=200))
    c = p.pools.chosen
    d = rows["disaggregated"]
    assert d["devices"] == p.devices
    assert d["error_band"] == (c.decode_sim or c.decode.sim).speed_error
    assert d["prefill_error_band"] == p.pools.prefill_sim.speed_error
    assert d["error_band"].startswith("outside the calibrated range (device ")       # toy devices: never measured
    code, text, err = run_cli(args)
    assert code == 0, err
    # one line when both answers share the band, else one per answer
    shared = rows["aggregated"]["error_band"] == d["error_band"]
    assert (f"TPOT: {d['error_band']}" if shared else f"TPOT of disaggregated: {d['error_band']}") in text.splitlines()
    assert f"prefill TTFT: {d['prefill_error_band']}" in text.splitlines()


@pytest.mark.slow
def test_compare_disagg_states_its_traffic_and_error_bands(run_cli, tmp_path):
    from disagg_toys import MIXED

    (tmp_path / "model.yaml").write_text(MODEL)
    (tmp_path / "mixed.yaml").write_text(MIXED)
    code, out, err = run_cli(["compare", tmp_path / "model.yaml", "-H", tmp_path / "mixed.yaml", "--context", 2000,
                              "--disagg", "--rate", 80, "--max-ttft-ms", 100, "--max-itl-ms", 5, "--isl", 2000,
                              "--osl", 200, "--prefill-hardware", "pgpu", "--time-limit", 10, "-q", "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["traffic"]["text"] == ("traffic: open Poisson arrivals at 80 requests/s, each a 2,000-token prompt "
                                      "(0 cached) then 200 output tokens")
    # the decode pool runs on dgpu devices, the prefill pool on pgpu: neither was ever measured
    assert doc["plan"]["error_band"] == "outside the calibrated range (device dgpu never measured)"
    assert doc["plan"]["prefill_error_band"] == "outside the calibrated range (device pgpu never measured)"


def test_a_frontier_plot_title_names_the_pareto_points_bands():
    from placer.cli.frontier_cmd import _plot_band

    a = "calibrated error ±29% for gpu dense, batch 1-8 (worst of 2 published points; median ±26%)"
    b = "outside the calibrated range (device x never measured)"
    rows = [dict(pareto=True, error_band=a), dict(pareto=False, error_band=b), dict(pareto=True, error_band=a)]
    assert _plot_band(rows) == "speeds: calibrated error ±29% for gpu dense, batch 1-8"
    rows += [dict(pareto=True, error_band=b)]
    assert _plot_band(rows) == f"speeds: calibrated error ±29% for gpu dense, batch 1-8; {b}"
    rows += [dict(pareto=True, error_band=f"{b[:-1]} {i})") for i in range(3)]
    assert _plot_band(rows) == "speeds' calibrated error: per point in the CSV's error_band column"


def test_the_frontier_sentence_names_the_cheapest_point_at_each_speed():
    from placer.planning.studies.frontier import FrontierReport, compare_at_speeds

    def row(platform, speed, mw, usd):
        return dict(platform=platform, valid=True, meets_ttft=True, per_user_tokens_per_s=speed,
                    tokens_per_s_per_mw=mw, usd_per_million_tokens=usd, devices=2, tp=1, ep=False,
                    live_per_replica=4)

    # a leads by tokens/s per MW, b by dollars: $1.500 against $2.000 per million tokens
    rep = FrontierReport("m", 1000, ["a", "b"], [row("a", 120, 900, 2.0), row("b", 110, 600, 1.5),
                                                 row("b", 90, 1000, 0.5)])
    (text,) = compare_at_speeds(rep, (100,))
    assert text.startswith("At 100 tokens/s per user, a is ahead with 900 tokens/s per MW")
    assert text.endswith("; cheapest per token: b, $1.500 per million tokens (2 devices per replica, "
                         "110 tokens/s per user).")
    rep.rows[1]["usd_per_million_tokens"] = rep.rows[0]["usd_per_million_tokens"] = None
    assert "cheapest" not in compare_at_speeds(rep, (100,))[0]       # no price at that speed


def test_a_speed_floors_json_rows_carry_their_error_band(run_cli):
    code, out, err = run_cli(["solve", "llama-3.1-8b", "-H", "h100", "--racks", 1, "--context", "2k", "--concurrency", 4,
                              "--isl", 1536, "--osl", 64, "--tp", 1, "--min-user-tps", 1, "--time-limit", 10,
                              "--threads", 1, "-q", "--json"])
    assert code == 0, err
    floor = json.loads(out)["speed_target"]
    model = load_model("llama-3.1-8b")
    inst = make_instance(model, load_fleet("h100", racks=1), workload_for(model, context="2k", concurrency=4))
    assert floor["chosen"]["load_per_replica"] == 4
    assert floor["chosen"]["error_band"] == error_band(inst, 4, 1600)       # gpu dense, batch 1-8
    assert all(c["error_band"] for c in floor["candidates"])


def test_a_disaggregated_point_prices_every_replica_of_both_pools(priced):
    """2 prefill replicas on a $2 device and 3 decode replicas on a $3 device: $13 an hour; at
    1,000 output tokens/s (3.6 M an hour), 13 / 3.6 = $3.611 per million tokens."""
    from types import SimpleNamespace

    from placer.planning.studies.frontier_disagg import _priced

    model, fleet = priced
    inst = make_instance(model, fleet, Workload(context_tokens=1000, concurrency=1))
    kinds = [d.type.name for d in inst.devices]

    def pool(kind):
        return SimpleNamespace(solved=SimpleNamespace(instance=inst,
                                                      per_group=SimpleNamespace(assignment=[kinds.index(kind)] * 4)))

    c = SimpleNamespace(x=2, prefill=pool("cheap"), y=3, decode=pool("dear"))
    got = _priced(c, 1000.0)
    assert got["usd_per_million_tokens"] == pytest.approx(13 / 3.6)
    assert got["price_source"] == ("cheap: $2 per device-hour: test figure, 2026-01-01 (assumption); "
                                   "dear: $12 per system-hour of 4 devices: test figure, 2026-01-01 (assumption)")
