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


def prefill(new: int, prompt: int) -> float:
    """One turn's prefill of ``new`` tokens after ``prompt - new`` in place, alone (as ALONE)."""
    return 15 + max(2e6 / BW, 2e6 * new / FL) + max(1000 * prompt / BW, 1000 * (tri(prompt) - tri(prompt - new)) / FL)


def itl(k: int) -> float:
    """A step of k sessions of 2,300 tokens: the GEMM of k tokens, attention over k x 2,300 tokens of KV."""
    return 15 + max(2e6 / BW, k * 2e6 / FL) + max(k * 2.3e6 / BW, k * 2 * 500 * 2300 / FL)


def test_with_a_host_tier_by_hand():
    h = _held(5.0, "host")
    # reloads: the prefixes 1,100 and 1,700 tokens; writes: 1,100 tokens, then 600 a turn
    reload, write = 50 + 1_700_000 / 1000.0, 50 + 1_100_000 / 1000.0
    assert h.reload_us == pytest.approx(reload)
    worst = max(prefill(1000, 1000), 50 + 1100 + prefill(500, 1600), reload + prefill(500, 2200))
    assert h.turn_ttft_us == pytest.approx(worst, rel=1e-12)
    assert h.tier_sessions == 10**9 // 2_300_000 == 434
    # every reserve of K = 1..3 slots: R resident + M parked, M = min(floor((K - R) P / T), P / reload, 434)
    best = None
    for k in (1, 2, 3):
        turn = 5000 + 100 * itl(k) + write
        period = turn + 10e6
        for r in range(k + 1):
            n = r + min(math.floor((k - r) * period / turn), math.floor(period / reload), 434)
            if best is None or n > best[0]:
                best = (n, k, r, turn, period)
    n, k, r, turn, period = best
    # 3 slots: 2 resident, the third's turns carry 434 parked sessions (the tier full)
    assert (n, k, r) == (436, 3, 2)
    assert (h.sessions, h.slots, h.resident, h.parked) == (436, 3, 2, 434) and h.proven
    assert "tier's capacity" in h.binding
    assert h.turn_us == pytest.approx(turn) and h.link_sessions == math.floor(period / reload)
    assert h.tier_bytes == 434 * 2_300_000 and h.kv_reserve_bytes == 3 * 2_300_000
    assert h.user_tokens_per_s == pytest.approx(1e6 / itl(3))
    # 436 sessions, 100 tokens each per cycle, on 25 kW (the tier adds 0 W here)
    assert h.power_w == 25_000 and h.tokens_per_s_per_mw == pytest.approx(436 * 100 / (period / 1e6) / 0.025)


def test_think_times_that_vary_give_a_bound_not_proven():
    from dataclasses import replace

    h = sessions_held(make_instance(ONE, FLEET, Workload(context_tokens=8000)), (0,),
                      replace(SHAPE, think_sigma=0.5), 5.0, "host")
    assert h.sessions == 436 and not h.proven
    assert "not proven" in h.lines(5.0)[0]


def test_the_record_the_mapping_keeps():
    rec = _held(5.0, "host").record("hand", 5.0)
    assert rec == {"preset": "hand", "ttft_target_ms": 5.0, "longest_context": 2300, "tier": "host",
                   "kv_reserve_sessions": 3, "resident": 2, "parked": 434, "tier_bytes_per_device": 434 * 2_300_000,
                   "sessions_held": 436, "proven": True}
    bare = _held(5.0).record("hand", 5.0)
    assert bare["tier"] is None and bare["parked"] == 0 and bare["sessions_held"] == bare["resident"] == 3


def test_a_reload_that_misses_the_target_adds_nothing():
    h = _held(1.0, "host")          # the 1.75 ms reload alone passes 1 ms
    assert h.sessions == h.on_chip == 3 and h.proven and "misses the target" in h.binding


def test_a_target_the_prefill_misses_holds_none():
    h = _held(ALONE / 2e3)
    assert h.sessions == 0 and "misses the target" in h.binding


def test_one_turn_sessions_park_nothing():
    # a session of one 1,100-token turn never idles: 8,000,000 // 1,100,000 = 7 on the chip, the tier adds none
    h = sessions_held(make_instance(ONE, FLEET, Workload(context_tokens=8000)), (0,),
                      SessionShape("one", 1000, 0, 100, 1, 10.0), 5.0, "host")
    assert h.sessions == h.on_chip == 7 and h.proven and "adds none" in h.binding
