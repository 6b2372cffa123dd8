"""The expert-parallel all-to-all priced from DeepEP's figures, and the expert balance with and
without redundant experts."""

from __future__ import annotations

import pytest

from placer.problem.all_to_all import all_to_all_us, deepep_bandwidth, message_bytes
from placer.simulate.expert_balance import balance, eplb_loads, expert_shares, linear_loads


def test_message_sizes_by_hand():
    # 128 tokens, top-8, hidden 7,168: FP8 out with a 4-byte scale per 128 values, BF16 back
    out, back = message_bytes(128, 7168, 8)
    assert out == 128 * 8 * (7168 + 7168 // 128 * 4)
    assert back == 128 * 8 * 7168 * 2


def test_low_latency_kernels_reproduce_deepeps_own_figures():
    # DeepEP's table: EP 8, 128 tokens, H800 + CX-7: dispatch 77 us, combine 114 us
    a = all_to_all_us("low_latency", 8, 128, 7168, 8, spans_nodes=True)
    assert a.dispatch_us == pytest.approx(77, rel=0.02) and a.combine_us == pytest.approx(114, rel=0.02)
    # EP 64: 173 / 314 us
    b = all_to_all_us("low_latency", 64, 128, 7168, 8, spans_nodes=True)
    assert b.dispatch_us == pytest.approx(173, rel=0.03) and b.combine_us == pytest.approx(314, rel=0.03)


def test_links_scale_the_figures_and_nvlink_is_capped_by_deepep_v2():
    slow = deepep_bandwidth("normal", 32, True, None, 50e9)
    fast = deepep_bandwidth("normal", 32, True, None, 100e9)         # an 800 Gb/s NIC
    assert fast[0] == pytest.approx(2 * slow[0]) and slow[0] == pytest.approx(58e9)
    h800 = deepep_bandwidth("normal", 8, False, 160e9, None)
    assert h800[0] == pytest.approx(min(153e9, 726e9 * 160 / 900))
    nvl72 = deepep_bandwidth("low_latency", 72, False, 900e9, None)   # one NVLink domain
    assert nvl72 == pytest.approx((726e9, 740e9))
    assert all_to_all_us("normal", 1, 128, 7168, 8, False).us == 0.0
    with pytest.raises(ValueError, match="unknown all-to-all mode"):
        deepep_bandwidth("fast", 8, True, None, None)


def test_linear_placement_and_eplb_packing_by_hand():
    shares = [0.4, 0.3, 0.2, 0.1]
    assert linear_loads(shares, 2) == pytest.approx([0.7, 0.3])
    assert eplb_loads(shares, 2, 0) == pytest.approx([0.5, 0.5])
    # two copies: the 0.4 expert splits into 0.2 + 0.2, then the 0.3 one into 0.15 + 0.15
    assert sorted(eplb_loads(shares, 2, 2)) == pytest.approx([0.5, 0.5])
    with pytest.raises(ValueError, match="do not divide"):
        eplb_loads(shares, 3, 1)


def test_redundant_experts_flatten_a_skewed_routing():
    uniform = balance(256, 64, 0, 4, 8, skew=0.0)
    assert uniform.without == pytest.approx(1.0) and uniform.with_copies == pytest.approx(1.0)
    skewed = balance(256, 72, 32, 4, 8, skew=0.5)
    assert skewed.without > 2.0 and skewed.with_copies < 1.1
    assert skewed.max_tokens(1.0) == 32                       # the mean rank: 4 tokens x 8 experts
    assert sum(expert_shares(256, 0.5)) == pytest.approx(1.0)


def test_linear_placement_gives_the_first_ranks_one_more_as_vllm_does():
    loads = linear_loads([1.0] * 10, 4)                      # 10 experts over 4 ranks: 3, 3, 2, 2
    assert loads == [3.0, 3.0, 2.0, 2.0]
    b = balance(256, 72, 0, 4, 8, skew=0.0)                  # 4 experts on the heaviest of 72, 3.56 mean
    assert b.without == pytest.approx(4 / (256 / 72)) and b.with_copies is None
