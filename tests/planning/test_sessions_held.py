"""Sessions held by hand on the one-device hand fleet of tests/simulate/test_sessions.py: 8,000,000 B
of KV room, 1,000 B of KV per token, a host tier of 1 GB at 1,000 B/us and 50 us latency."""

from __future__ import annotations

import math

import pytest

from placer.planning.sessions_held import sessions_held
from placer.problem.instance import make_instance
from placer.simulate.session_traffic import SessionShape
from placer.specs.fleet import fleet_from_dict
from placer.specs.model import model_from_dict
from placer.specs.workload import Workload

BW, FL = 500_000.0, 5e8
FLEET = fleet_from_dict({
    "name": "hand", "device": {"memory": "10 MB", "memory_bandwidth": "1 TB/s", "compute": "1 PFLOPS",
                               "power": "25 kW",
                               "tiers": [{"name": "host", "capacity": "1 GB", "bandwidth": "1 GB/s", "latency_us": 50}],
                               "perf": {"fixed_overhead_us_per_layer": 10, "fixed_overhead_us_per_stage": 5,
                                        "bandwidth_efficiency": 0.5, "compute_efficiency": 0.5}},
    "fleet": {"racks": 1, "per_rack": 1, "intra_rack_latency_us": 2, "inter_rack_latency_us": 3}})
ONE = model_from_dict({"name": "one", "layers": [
    {"kind": "attention", "params": 1_000_000, "kv_elements_per_token": 500, "kv_bytes_per_token": 1000}]})
# turns: prompts 1,000, 1,600, 2,200 (500 new tokens each after the first), 100 out: the longest
# context 2,300 tokens, its prefix 1,700
SHAPE = SessionShape("hand", 1000, 500, 100, 3, 10.0)


def tri(p: int) -> int:
    return p * (p + 1) // 2


# 500 new tokens: the weights' GEMM and attention, each at its roofline (tests/simulate/test_simulate_prefill.py)
ALONE = 15 + max(2e6 / BW, 2e6 * 500 / FL) + max(1000 * 2200 / BW, 1000 * (tri(2200) - tri(1700)) / FL)


def _held(target_ms, tier=None):
    return sessions_held(make_instance(ONE, FLEET, Workload(context_tokens=8000)), (0,), SHAPE, target_ms, tier)


def test_on_the_chip_the_ceiling_at_the_longest_context():
    h = _held(5.0)
    assert h.longest_context == 2300 and h.on_chip == h.sessions == 8_000_000 // 2_300_000 == 3
    assert h.proven and h.turn_ttft_us == pytest.approx(ALONE, rel=1e-12)


def test_with_a_host_tier_by_hand():
    h = _held(5.0, "host")
    reload = 50 + 1_700_000 / 1000.0
    assert h.reload_us == pytest.approx(reload) and h.turn_ttft_us == pytest.approx(reload + ALONE)
    assert h.tier_sessions == 10**9 // 2_300_000 == 434
    # a step of the 3 on-chip sessions: the GEMM of 3 tokens, attention over 3 x 2,300 tokens of KV
    itl = 15 + max(2e6 / BW, 3 * 2e6 / FL) + max(3 * 2.3e6 / BW, 3 * 2 * 500 * 2300 / FL)
    turn = 5000 + 100 * itl
    assert h.turn_us == pytest.approx(turn)
    cycle = turn + 10e6
    assert h.duty_sessions == math.floor(3 * cycle / turn)
    assert h.link_sessions == math.floor(1e9 * cycle / 1e6 / 1.7e6)
    assert h.sessions == 434 and not h.proven and "tier capacity" in h.binding
    assert h.tier_bytes == 434 * 2_300_000
    assert h.user_tokens_per_s == pytest.approx(1e6 / itl)
    # 434 sessions, 100 tokens each per cycle, on 25 kW (the tier adds 0 W here)
    assert h.power_w == 25_000 and h.tokens_per_s_per_mw == pytest.approx(434 * 100 / (cycle / 1e6) / 0.025)


def test_a_reload_that_misses_the_target_adds_nothing():
    h = _held(1.0, "host")          # the 1.75 ms reload alone passes 1 ms
    assert h.sessions == h.on_chip == 3 and h.proven and "misses the target" in h.binding


def test_a_target_the_prefill_misses_holds_none():
    h = _held(ALONE / 2e3)
    assert h.sessions == 0 and "misses the target" in h.binding
