"""Sessions against hand computation: one park-and-reload turn (bytes moved, time, TTFT), the same
turn recomputed without a tier, and kept on the chip when there is room.

The hand fleet of ``test_simulate`` (1 TB/s x 0.5 = 500,000 B/us, 1 PFLOP/s x 0.5 = 5e8 FLOP/us,
10 us per layer, 5 us per stage visit) with a host tier of 1 GB/s (1,000 B/us) and 50 us latency;
ONE is one 16-bit attention layer of 2 MB with 1,000 B of KV per token, so a device of 10 MB holds
8,000 tokens of KV beside its weights.
"""

from __future__ import annotations

import pytest

from placer.problem.instance import make_instance
from placer.simulate.arguments import Serving
from placer.simulate.session_traffic import PRESETS, Sessions, SessionTrace, TurnSpec
from placer.simulate.sessions import SessionSimulation, simulate_sessions
from placer.specs.errors import InvalidSpec
from placer.specs.fleet import fleet_from_dict
from placer.specs.model import model_from_dict
from placer.specs.workload import Workload

BW, FL, TIER_BW = 500_000.0, 5e8, 1000.0       # B/us, FLOP/us, B/us
FLEET = fleet_from_dict({
    "name": "hand", "device": {"memory": "10 MB", "memory_bandwidth": "1 TB/s", "compute": "1 PFLOPS",
                               "power": "25 kW",
                               "tiers": [{"name": "host", "capacity": "1 GB", "bandwidth": "1 GB/s",
                                          "latency_us": 50, "power": "100 W"}],
                               "perf": {"fixed_overhead_us_per_layer": 10, "fixed_overhead_us_per_stage": 5,
                                        "bandwidth_efficiency": 0.5, "compute_efficiency": 0.5}},
    "fleet": {"racks": 1, "per_rack": 1, "intra_rack_latency_us": 2, "inter_rack_latency_us": 3}})
ONE = model_from_dict({"name": "one", "layers": [
    {"kind": "attention", "params": 1_000_000, "kv_elements_per_token": 500, "kv_bytes_per_token": 1000}]})


def tri(p: int) -> int:
    return p * (p + 1) // 2


def chunk_only_us(start: int, n: int) -> float:
    """A step of one prompt chunk of ``n`` tokens after ``start`` cached ones (test_simulate_prefill):
    overheads, then the weights' GEMM and attention, each at its roofline (the slower of its bytes
    and its FLOPs)."""
    return (15 + max(2e6 / BW, 2e6 * n / FL)
            + max(1000 * (start + n) / BW, 1000 * (tri(start + n) - tri(start)) / FL))


# A: a 3,000-token first turn, then after 1 s a turn adding 100 tokens. B arrives at 0.1 s with
# 6,000 tokens: A (3,010 tokens idle) no longer fits beside it and leaves the chip; at A's second
# turn B (6,010 idle) leaves in turn and A's 3,010 tokens come back from the tier.
TRACE = SessionTrace(((0.0, (TurnSpec(3000, 10), TurnSpec(3110, 10, 1.0))), (0.1, (TurnSpec(6000, 10),))), "hand")


def _run(tier, trace=TRACE):
    inst = make_instance(ONE, FLEET, Workload(context_tokens=8000))
    sim = SessionSimulation(inst, (0,), Sessions(trace=trace), tier, Serving(max_num_batched_tokens=8192))
    return sim, sim.result()


def test_park_and_reload_turn_by_hand():
    sim, res = _run("host")
    a2 = sim.reqs[2]
    assert (a2.session, a2.prompt, a2.reused) == (0, 3110, 3010)
    reload_us = 50 + 3010 * 1000 / TIER_BW                       # latency + 3,010,000 B at 1,000 B/us
    assert a2.reload_us == pytest.approx(reload_us, rel=1e-12)
    assert a2.first - a2.arrival == pytest.approx(reload_us + chunk_only_us(3010, 100), rel=1e-9)
    assert res.bytes_reloaded == 3010 * 1000
    # written through: A's 3,010 tokens, B's 6,010, then A's 110 new ones
    assert res.bytes_parked == (3010 + 6010 + 110) * 1000
    assert (res.turns, res.turns_reloaded, res.turns_recomputed, res.turns_from_chip) == (3, 1, 0, 0)
    assert res.sessions_held_peak == 2 and res.sessions_ended == 2
    assert res.tier_peak_bytes == (3010 + 6010) * 1000     # A and B idle; B has ended when A grows
    assert res.power_w == pytest.approx(25_000 + 100)


def test_without_a_tier_the_turn_is_recomputed():
    sim, res = _run(None)
    a2 = sim.reqs[2]
    assert a2.reused == 0 and a2.reload_us == 0
    assert a2.first - a2.arrival == pytest.approx(chunk_only_us(0, 3110), rel=1e-9)
    assert (res.turns_reloaded, res.turns_recomputed, res.bytes_parked, res.bytes_reloaded) == (0, 1, 0, 0)
    assert res.power_w == pytest.approx(25_000)


def test_room_on_the_chip_keeps_the_prefix():
    small = SessionTrace(((0.0, (TurnSpec(3000, 10), TurnSpec(3110, 10, 1.0))), (0.1, (TurnSpec(2000, 10),))), "hand")
    sim, res = _run("host", small)
    a2 = sim.reqs[2]
    assert a2.reused == 3010 and a2.reload_us == 0
    assert a2.first - a2.arrival == pytest.approx(chunk_only_us(3010, 100), rel=1e-9)
    assert (res.turns_from_chip, res.turns_reloaded, res.bytes_reloaded) == (1, 0, 0)


def test_a_device_without_the_tier_is_named():
    inst = make_instance(ONE, FLEET, Workload(context_tokens=8000))
    with pytest.raises(InvalidSpec, match="no 'nvme' tier"):
        simulate_sessions(inst, (0,), Sessions(trace=TRACE), "nvme")


def test_presets_grow_turn_by_turn():
    import numpy as np
    shape = PRESETS["agent-1m"]
    turns = shape.turns_of(np.random.default_rng(0))
    assert len(turns) == 40 and turns[0].prompt == 24_400
    assert turns[1].prompt == 24_400 + 600 + 24_400 and turns[1].think_s == 30.0
    assert turns[-1].prompt + turns[-1].output == shape.final_context() == 1_000_000
    assert len(shape.turns_of(np.random.default_rng(0), limit=100_000)) == 4     # 99,400 + 600 = 100,000 fits; the 5th does not


def test_copilot_session_trace_is_read():
    from pathlib import Path

    from placer.simulate.session_traffic import read_session_trace

    path = Path(__file__).parents[1] / "fixtures" / "traces" / "copilot_sessions_sample.jsonl"
    trace = read_session_trace(path)
    assert [a for a, _t in trace.sessions] == [0.0, 30.0, 120.0]         # by first call, from the first
    first = trace.sessions[0][1]
    # calls at 10:00:00 (2 s) and 10:00:07 (1.5 s) then 10:01:00: idle 5 s and 51.5 s before them
    assert first == (TurnSpec(12000, 300, 0.0), TurnSpec(14800, 250, 5.0), TurnSpec(20000, 500, 51.5))
    assert trace.sessions[1][1] == (TurnSpec(8000, 200, 0.0), TurnSpec(9000, 150, 2.5))
    assert "3 sessions, 6 turns" in trace.describe()


def test_session_trace_errors_name_the_field(tmp_path):
    from placer.simulate.session_traffic import read_session_trace

    bad = tmp_path / "s.jsonl"
    bad.write_text('{"session_id": "x", "turns": [{"llm_calls": [{"timestamp": "2026-06-01T10:00:00Z", '
                   '"tokens": {"prompt": -3, "completion": 1}}]}]}\n')
    with pytest.raises(InvalidSpec, match=r"line 1: turns\.0\.llm_calls\.0\.tokens\.prompt"):
        read_session_trace(bad)
    bad.write_text("not json\n")
    with pytest.raises(InvalidSpec, match="line 1"):
        read_session_trace(bad)


@pytest.mark.parametrize("field,value,where", [
    ("bandwidth", "fast", "device.tiers.0.bandwidth"), ("capacity", "0 GB", "device.tiers.0.capacity"),
    ("name", "tape", "device.tiers.0.name"), ("latency_us", -1, "device.tiers.0.latency_us"),
    ("colour", "red", "device.tiers.0.colour")])
def test_a_bad_tier_field_is_named(field, value, where):
    tier = {"name": "host", "capacity": "1 GB", "bandwidth": "1 GB/s", field: value}
    spec = {"name": "t", "device": {"memory": "10 MB", "tiers": [tier]}, "fleet": {"racks": 1, "per_rack": 1}}
    with pytest.raises(InvalidSpec) as exc:
        fleet_from_dict(spec, source="t.yaml")
    assert exc.value.source == "t.yaml" and exc.value.field == where


def test_catalog_tiers_per_device():
    from placer.specs.fleet import load_fleet
    from placer.specs.tiers import tier_of

    gb200 = tier_of(load_fleet("gb200-nvl72").devices[0].type, "host")
    assert (gb200.capacity_bytes, gb200.bandwidth) == (240e9, 225e9)      # a Grace's 480 GB and 450 GB/s, 2 GPUs
    b200 = tier_of(load_fleet("b200").devices[0].type, "host")
    assert (b200.capacity_bytes, b200.bandwidth) == (250e9, 50e9)
    assert tier_of(load_fleet("wse-3t").devices[0].type, "host").power_w == 1000
