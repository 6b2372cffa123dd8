"""Disaggregated prefill/decode plans (placer/planning/disagg.py, placer/mapping/pools.py): two
hand-checkable plans, one on a mixed GPU fleet (one type prefills, the other decodes) and one
with GPUs prefilling for wafers, validated, simulated and exported; the ratio of the pools is
re-derived here from the plan's simulated figures with the formulas written out by hand."""

from __future__ import annotations

import copy
import json
import math

import pytest
from disagg_toys import GPUS, KV_PER_TOKEN, LAYERS, MIXED, MODEL, WAFERS

from placer.mapping import read_mapping
from placer.mapping.validate import validate_mapping
from placer.planning import Pools, Requirements, SolverSettings, Targets, plan
from placer.planning.disagg import prefill_replicas_for
from placer.planning.disagg_check import queue_wait_us
from placer.specs.errors import InvalidSpec
from placer.specs.fleet import load_fleet
from placer.specs.model import load_model
from placer.specs.workload import Workload, workload_for

ISL, OSL = 2000, 200
ONE_FLEET = """name: pdwafergpu
device_types:
  wafer: {kind: wafer, memory: 12 GB, memory_bandwidth: 20 PB/s, compute: 100 PFLOPS, power: 20 kW,
          perf: {fixed_overhead_us_per_layer: 400}}
  gpu: {kind: gpu, memory: 16 GB, memory_bandwidth: 2 TB/s, compute: 400 TFLOPS, power: 500 W,
         perf: {}}
fleet:
  groups:
    - {device: wafer, racks: 2, per_rack: 4}
    - {device: gpu, racks: 2, per_rack: 4}
  intra_rack_latency_us: 2
  inter_rack_latency_us: 6
  intra_rack_bandwidth: 400 GB/s
  inter_rack_bandwidth: 50 GB/s
"""
# one prompt's KV: 4 layers x 65,536 B x 2,000 tokens
TRANSFER_BYTES = LAYERS * KV_PER_TOKEN * ISL
assert TRANSFER_BYTES == 524_288_000


@pytest.fixture(scope="module")
def specs(tmp_path_factory):
    d = tmp_path_factory.mktemp("disagg")
    for name, text in (("model.yaml", MODEL), ("mixed.yaml", MIXED), ("wafers.yaml", WAFERS), ("gpus.yaml", GPUS),
                       ("onefleet.yaml", ONE_FLEET)):
        (d / name).write_text(text)
    return d


def _plan(specs, fleet, rate, ttft_ms, itl_ms, prefill):
    m = load_model(specs / "model.yaml")
    wl = workload_for(m, context=ISL)
    req = Requirements(targets=Targets(max_ttft_ms=ttft_ms, max_itl_ms=itl_ms),
                       pools=Pools(prefill_fleet=prefill, rate=rate, decode_tokens=OSL))
    return plan(m, fleet, wl, req, SolverSettings(time_limit=10))


@pytest.fixture(scope="module")
def mixed_plan(specs):
    return _plan(specs, load_fleet(specs / "mixed.yaml"), 80.0, 100.0, 5.0, "pgpu")


@pytest.fixture(scope="module")
def wafer_plan(specs):
    return _plan(specs, load_fleet(specs / "wafers.yaml"), 150.0, 200.0, 2.0, load_fleet(specs / "gpus.yaml"))


def _check_ratio(p, rate, ttft_ms):
    """x and y of every candidate re-derived by hand from the plan's simulated figures (each one
    fewer fails), and the chosen one has the fewest devices."""
    for c in p.pools.candidates:
        _check_candidate(p, c, rate, ttft_ms)
    c = p.pools.chosen
    # fewest devices among the candidates the event run did not reject; one whose x the event run
    # raised says so in the message, and its run meets the TTFT
    assert c.devices == min(k.devices for k in p.pools.candidates if not k.event_miss)
    assert c.devices == c.x * c.prefill.devices + c.y * c.decode.devices == p.devices
    if c.closed_x is not None:
        assert c.x > c.closed_x and f"so the plan takes {c.x}" in p.pools.message
        assert p.pools.prefill_sim.ttft_p50_us + c.transfer_us <= ttft_ms * 1e3


def _check_candidate(p, c, rate, ttft_ms):
    t = p.pools.link.time_us(TRANSFER_BYTES)
    s, tp = c.prefill.interval_us, c.prefill.prefill_us
    # prefill: the fewest x whose M/D/1 wait rho s / (2 (1 - rho)), rho = rate s / x, fits the slack
    slack = ttft_ms * 1e3 - tp - t
    closed = c.x if c.closed_x is None else c.closed_x     # the event run may raise it (tests/planning/test_disagg_check.py)
    for x in range(1, closed):
        rho = rate / x * s / 1e6
        assert rho >= 1 or rho * s / (2 * (1 - rho)) > slack
    rho = rate / closed * s / 1e6
    assert rho * s / (2 * (1 - rho)) <= slack
    rho = rate / c.x * s / 1e6
    assert math.isclose(c.queue_us, rho * s / (2 * (1 - rho)), rel_tol=1e-12)
    assert math.isclose(c.ttft_us, c.queue_us + tp + t, rel_tol=1e-12)
    assert c.ttft_us <= ttft_ms * 1e3
    # decode: live = rate x OSL x TPOT at the held load (Little's law); y = ceil(live / held)
    d = c.decode
    assert math.isclose(d.tpot_us, 1e6 / d.sim.per_user_tokens_per_s)
    assert d.tpot_us <= 1e3 * p.pools.tpot_ms
    live = rate * OSL * d.tpot_us / 1e6
    assert (c.y - 1) * d.held < live <= c.y * d.held


def test_mixed_gpu_fleet_plan(mixed_plan):
    p = mixed_plan
    assert p.pools is not None and p.feasible and p.proven
    c = p.pools.chosen
    # the prefill pool is on the pgpu devices, the decode pool on the dgpu ones
    assert {st["device"][:2] for st in p.mapping["pools"]["prefill"]["stages"]} <= {"r0", "r1"}
    assert {st["device"][:2] for st in p.mapping["pools"]["decode"]["stages"]} <= {"r2", "r3"}
    # the link between the pools' racks: 100 GB/s, 5 us -> 5 us + 524,288,000 / 1e11 s = 5,247.88 us
    assert p.pools.transfer_bytes == TRANSFER_BYTES
    assert p.pools.link.bandwidth == 100e9 and p.pools.link.latency_us == 5
    assert c.transfer_us == pytest.approx(5 + 5242.88, abs=1e-9)
    _check_ratio(p, 80.0, 100.0)
    assert c.x >= 2                      # the rate needs more than one prefill replica


def test_wafers_decode_gpus_prefill(wafer_plan):
    p = wafer_plan
    assert p.feasible and p.proven
    pools = p.mapping["pools"]
    assert pools["prefill"]["hardware"]["name"] == "pdgpus" and pools["decode"]["hardware"]["name"] == "pdwafers"
    # two fleets: the slower inter-rack link, 50 GB/s and 6 us -> 6 + 524,288,000 / 5e10 s = 10,491.76 us
    assert p.pools.link.bandwidth == 50e9 and p.pools.link.latency_us == 6
    assert p.pools.chosen.transfer_us == pytest.approx(6 + 10485.76, abs=1e-9)
    _check_ratio(p, 150.0, 200.0)
    assert p.pools.chosen.x >= 2 and max(c.y for c in p.pools.candidates) >= 2


def test_wafers_and_gpus_in_one_fleet(specs, wafer_plan):
    """The same pair as one fleet of two device types: the GPUs prefill, the wafers decode, and the
    answer is the two-fleet one (same devices, link figures, ratio)."""
    p = _plan(specs, load_fleet(specs / "onefleet.yaml"), 150.0, 200.0, 2.0, "gpu")
    assert p.feasible and p.proven
    pools = p.mapping["pools"]
    assert all("w" in st["device"] for st in pools["decode"]["stages"])
    assert all("g" in st["device"] for st in pools["prefill"]["stages"])
    assert p.pools.link.bandwidth == 50e9 and p.pools.link.latency_us == 6
    _check_ratio(p, 150.0, 200.0)
    a, b = p.pools.chosen, wafer_plan.pools.chosen
    assert (a.x, a.y, a.devices) == (b.x, b.y, b.devices)
    assert validate_mapping(p.mapping) == []


def test_the_prefill_pool_holds_the_prompts_in_flight(mixed_plan):
    """The prefill placement's workload: the prompt's KV for each prompt in flight and one chunk of
    activations; the decode placement's: KV for prompt + output."""
    pools = mixed_plan.mapping["pools"]
    c = mixed_plan.pools.chosen
    pw, dw = pools["prefill"]["workload"], pools["decode"]["workload"]
    assert pw["context_tokens"] == ISL and pw["concurrency"] == c.prefill.in_flight
    assert pw["micro_batch"] == ISL                     # the whole prompt is one chunk (budget 8,192)
    assert dw["context_tokens"] == ISL + OSL
    assert c.prefill.in_flight == math.ceil(c.prefill.prefill_us / c.prefill.interval_us - 1e-9)


def test_two_pool_mappings_validate_and_catch_tampering(mixed_plan, wafer_plan, tmp_path):
    from placer.mapping import write_mapping

    for p in (mixed_plan, wafer_plan):
        path = tmp_path / "pd.json"
        write_mapping(path, p.mapping)
        doc = read_mapping(path)
        assert doc["schema_version"] == 4
        assert validate_mapping(doc) == []
    bad = copy.deepcopy(mixed_plan.mapping)
    bad["transfer"]["bytes"] += 1
    bad["summary"]["devices_used"] += 1
    bad["pools"]["decode"]["stages"][0]["bytes"]["weights"] += 1
    kinds = {v.kind for v in validate_mapping(bad)}
    assert {"transfer_mismatch", "pool_devices_mismatch", "bytes_mismatch"} <= kinds
    same = copy.deepcopy(mixed_plan.mapping)
    same["pools"]["decode"] = copy.deepcopy(same["pools"]["prefill"])
    kinds = {v.kind for v in validate_mapping(same)}
    assert {"pools_overlap", "pool_workload_mismatch"} <= kinds


def test_validate_mapping_validates_each_pool_of_a_two_pool_mapping(mixed_plan):
    """validate_mapping (placer.validate_mapping) takes a two-pool mapping as it takes a one-pool one: each pool is
    validated (its violations prefixed by the pool), then the pair; a fleet or workload override,
    which could only be one pool's, is refused naming the field."""
    import placer
    from placer.mapping.view import PooledView, mapping_view

    assert placer.validate_mapping is validate_mapping
    doc = mixed_plan.mapping
    assert validate_mapping(doc) == []
    view = mapping_view(doc)
    assert isinstance(view, PooledView) and validate_mapping(view) == []
    assert [st.devices for st in view.decode.stages] == [
        tuple(st.get("group", {}).get("devices") or [st["device"]]) for st in doc["pools"]["decode"]["stages"]]
    bad = copy.deepcopy(doc)
    bad["pools"]["prefill"]["stages"][0]["bytes"]["free"] += 1
    found = validate_mapping(bad)
    assert [v.kind for v in found] == ["bytes_mismatch"] and found[0].message.startswith("prefill pool: stage 0")
    with pytest.raises(InvalidSpec, match="/pools.*own hardware"):
        validate_mapping(doc, fleet=load_fleet("h100"))
    with pytest.raises(InvalidSpec, match="/pools.*own workload"):
        validate_mapping(doc, workload=Workload())


def test_pooled_simulation_meets_the_targets(mixed_plan):
    from placer.simulate.pooled import simulate_pooled

    r = simulate_pooled(mixed_plan.mapping)
    c = mixed_plan.pools.chosen
    assert r["transfer_us"] == pytest.approx(c.transfer_us)
    assert r["ttft_p50_us"] == pytest.approx(r["prefill"]["ttft_p50_us"] + c.transfer_us)
    assert r["tpot_us"] <= 5000 and r["meets_targets"]
    assert r["aggregate_tokens_per_s"] == pytest.approx(c.y * r["decode"]["aggregate_tokens_per_s"])


def test_exports_carry_the_runtimes_pd_flags(mixed_plan):
    from placer.export import ExportRefused, export_mapping

    sg = export_mapping(mixed_plan.mapping, "sglang").text
    assert "--disaggregation-mode prefill --disaggregation-transfer-backend mooncake" in sg
    assert "--disaggregation-mode decode --disaggregation-transfer-backend mooncake" in sg
    assert "sglang_router.launch_router --pd-disaggregation" in sg
    decode_line = next(ln for ln in sg.splitlines() if "--disaggregation-mode decode" in ln)
    assert f"--max-running-requests {mixed_plan.pools.chosen.decode.held} " in decode_line
    vl = export_mapping(mixed_plan.mapping, "vllm").text
    launch = [ln for ln in vl.splitlines() if ln.startswith("VLLM_PP_LAYER_PARTITION")]
    assert len(launch) == 2
    assert all(json.loads(ln.split("--kv-transfer-config '")[1].split("'")[0]) ==
               {"kv_connector": "NixlConnector", "kv_role": "kv_both"} for ln in launch)
    assert "no production prefill/decode router" in vl
    with pytest.raises(ExportRefused, match="no prefill/decode disaggregation"):
        export_mapping(mixed_plan.mapping, "megatron")


def test_prefill_replicas_closed_form():
    # s = 10 ms, slack 5 ms: rho_max = 2 x 5 / (10 + 10) = 0.5; 120 requests/s x 10 ms = 1.2 -> x = 3
    assert prefill_replicas_for(120.0, 10_000.0, 5_000.0) == 3
    assert queue_wait_us(120.0, 10_000.0, 3) == pytest.approx(0.4 * 10_000 / (2 * 0.6))
    assert queue_wait_us(120.0, 10_000.0, 2) > 5_000.0
    assert prefill_replicas_for(1.0, 10_000.0, -1.0) is None


def test_requirements_refuse_incomplete_targets():
    with pytest.raises(InvalidSpec) as e:
        Requirements(targets=Targets(max_itl_ms=30), pools=Pools())
    assert e.value.field == "max_ttft_ms"
    with pytest.raises(InvalidSpec) as e:
        Requirements(targets=Targets(max_ttft_ms=2000), pools=Pools())
    assert e.value.field == "max_itl_ms"
    # a prefill fleet is named only inside Pools, so one without disaggregation cannot be asked for;
    # the command line refuses --prefill-hardware without --disagg (test_cli_refuses_prefill_hardware_alone)
    with pytest.raises(InvalidSpec) as e:
        Requirements(targets=Targets(max_ttft_ms=2000, max_itl_ms=30), pools=Pools(rate=-1.0))
    assert e.value.field == "rate"


def test_cli_refuses_prefill_hardware_alone(specs, run_cli):
    code, _text, err = run_cli(["solve", specs / "model.yaml", "-H", specs / "mixed.yaml", "--prefill-hardware",
                                "pgpu", "-q"])
    assert code == 2 and "--prefill-hardware: prefill_hardware: applies to --disagg plans" in err, err


def test_cli_solve_disagg_writes_a_valid_two_pool_mapping(specs, run_cli, tmp_path):
    out = tmp_path / "pd.json"
    code, text, err = run_cli(["solve", specs / "model.yaml", "-H", specs / "mixed.yaml", "--context", ISL,
                               "--disagg", "--prefill-hardware", "pgpu", "--rate", 80, "--max-ttft-ms", 100,
                               "--max-itl-ms", 5, "--isl", ISL, "--osl", OSL, "--time-limit", 10, "-q", "-o", out])
    assert code == 0, err
    assert "prefill" in text and "decode" in text and f"{TRANSFER_BYTES:,} B" in text
    code, text, err = run_cli(["validate", out, "--json"])
    assert code == 0 and json.loads(text)["valid"], text + err
    code, text, err = run_cli(["validate", out])
    assert code == 0 and "valid (two pools of pdtoy" in text, text + err
    code, text, err = run_cli(["export", out, "--format", "sglang"])
    assert code == 0 and "--disaggregation-mode decode" in text
    code, text, err = run_cli(["simulate", out, "--json"])
    assert code == 0, err
    sim = json.loads(text)
    assert sim["kind"] == "disaggregated" and sim["meets_targets"]
    assert sim["ttft_p50_us"] == pytest.approx(sim["prefill"]["ttft_p50_us"] + sim["transfer_us"])
    # each pool's run states its traffic: Poisson prompts on a prefill replica, decode only on a decode one
    assert sim["prefill"]["traffic"]["shape"] == "poisson" and sim["decode"]["traffic"]["shape"] == "decode_only"
    code, text, err = run_cli(["simulate", out])
    assert f"  prefill replica's {sim['prefill']['traffic']['text']}" in text.splitlines()
    assert f"  decode replica's {sim['decode']['traffic']['text']}" in text.splitlines()
    assert "traffic: open Poisson arrivals at " in text and "traffic: decode only " in text
    code, _text, err = run_cli(["solve", specs / "model.yaml", "-H", specs / "mixed.yaml", "--rate", 3])
    assert code == 2 and "--disagg" in err


@pytest.mark.slow
def test_cli_plan_rate_sets_both_answers_side_by_side(specs, run_cli):
    from placer import Traffic

    code, text, err = run_cli(["plan", specs / "model.yaml", "-H", specs / "mixed.yaml", "--context", ISL,
                               "--rate", 80, "--max-ttft-ms", 100, "--max-itl-ms", 5, "--isl", ISL, "--osl", OSL,
                               "--prefill-hardware", "pgpu", "--time-limit", 10, "-q", "--json"])
    # the library plan for the same traffic (the CLI's decode runs generate its OSL)
    m = load_model(specs / "model.yaml")
    mixed_plan = plan(m, load_fleet(specs / "mixed.yaml"), workload_for(m, context=ISL),
                      Requirements(targets=Targets(max_ttft_ms=100.0, max_itl_ms=5.0),
                                   pools=Pools(prefill_fleet="pgpu", rate=80.0, prompt_tokens=ISL, decode_tokens=OSL)),
                      SolverSettings(time_limit=10), traffic=Traffic(prompt_tokens=ISL, output_tokens=OSL))
    assert code == 0, err
    rows = {r["serving"]: r for r in json.loads(text)["rows"]}
    # aggregated: live requests by Little's law at the targets, ceil(80 x (0.1 s + 200 x 5 ms)) = 88
    assert rows["aggregated"]["live_requests"] == 88
    d = rows["disaggregated"]
    assert d["feasible"] and d["meets_ttft"] and d["proven"]
    assert d["devices"] == mixed_plan.devices
    assert d["replicas"] == {"prefill": mixed_plan.pools.chosen.x, "decode": mixed_plan.pools.chosen.y}


def test_replicas_fit_racks_of_their_device_type(specs):
    from placer.planning.disagg_fit import fits as _fits

    fleet = load_fleet(specs / "mixed.yaml")          # 2 racks of 2 pgpu, 2 racks of 2 dgpu
    assert _fits(fleet, [("pgpu", 2)] * 2)
    assert not _fits(fleet, [("pgpu", 2)] * 3)
    assert _fits(fleet, [("dgpu", 1)] * 4 + [("pgpu", 1)] * 4)
    assert not _fits(fleet, [("dgpu", 1)] * 5)
    assert not _fits(fleet, [("dgpu", 4)])            # a group stays in one rack
