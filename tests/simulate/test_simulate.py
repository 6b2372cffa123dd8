"""The simulator against closed forms on a hand-made model and fleet whose stage times are easy
to compute by hand: 1 TB/s x 0.5 = 500,000 B/us, 10 us per node, 5 us per stage visit, 2 us hops."""

from __future__ import annotations

import math

import pytest

from placer.problem.instance import make_instance
from placer.problem.reductions.refine import refine
from placer.simulate import (
    RunSettings,
    Serving,
    Traffic,
    parse_context_dist,
    segments_of,
    simulate,
    split_options,
)
from placer.simulate.cost import NodeCost
from placer.specs.errors import InvalidSpec
from placer.specs.fleet import fleet_from_dict
from placer.specs.model import model_from_dict
from placer.specs.workload import Workload

FLEET = fleet_from_dict({
    "name": "hand", "device": {"memory": "10 MB", "memory_bandwidth": "1 TB/s", "compute": "1 PFLOPS",
                               "power": "25 kW",
                               "perf": {"fixed_overhead_us_per_layer": 10, "fixed_overhead_us_per_stage": 5,
                                        "bandwidth_efficiency": 0.5, "compute_efficiency": 0.5}},
    "fleet": {"racks": 1, "per_rack": 4, "intra_rack_latency_us": 2, "inter_rack_latency_us": 3}})
BW = 500_000.0   # B/us

LINEAR = model_from_dict({"name": "linear4", "layers": [
    {"kind": "linear_attention", "weight_bytes": 2_000_000, "state_bytes_per_request": 1000},
    {"kind": "linear_attention", "weight_bytes": 2_000_000, "state_bytes_per_request": 1000},
    {"kind": "linear_attention", "weight_bytes": 5_000_000, "state_bytes_per_request": 1000},
    {"kind": "linear_attention", "weight_bytes": 3_000_000, "state_bytes_per_request": 1000},
]})
ROUTE = (0, 0, 1, 2)                                 # stages: layers 0-1, 2, 3
# by hand, one request: stage overhead + nodes x 10 + (weights + 2 x 1000 B state per node) / BW
STAGE_US = [5 + 20 + (4e6 + 4000) / BW, 5 + 10 + (5e6 + 2000) / BW, 5 + 10 + (3e6 + 2000) / BW]
TOKEN_US = sum(STAGE_US) + 2 * 2.0                   # 33.008 + 25.004 + 21.004 + two 2 us hops


def _inst(model, context=1000, **wl):
    return make_instance(model, FLEET, Workload(context_tokens=context, **wl))


def test_stage_times_by_hand():
    segs = segments_of(_inst(LINEAR), ROUTE)
    assert [s.nodes for s in segs] == [(0, 1), (2,), (3,)]
    assert [s.time_us([1000]) for s in segs] == pytest.approx(STAGE_US, rel=1e-12)
    assert STAGE_US == pytest.approx([33.008, 25.004, 21.004])
    assert [s.hop_us for s in segs] == [2.0, 2.0, 0.0]
    # a micro-batch of 4 reads the weights once and the state four times
    assert segs[0].time_us([1000] * 4) == pytest.approx(25 + (4e6 + 4 * 4000) / BW)


def test_one_request_token_latency_is_stage_times_plus_hops():
    res = simulate(_inst(LINEAR), ROUTE, Traffic(requests=1, output_tokens=40))
    assert res.itl_p50_us == pytest.approx(TOKEN_US, rel=1e-9)
    assert res.itl_p99_us == pytest.approx(TOKEN_US, rel=1e-9)
    assert res.unloaded_token_latency_us == pytest.approx(TOKEN_US, rel=1e-9)
    assert res.per_user_tokens_per_s == pytest.approx(1e6 / TOKEN_US, rel=1e-9)
    assert res.tokens == 40 and res.live_requests == 1
    assert res.window_us == pytest.approx(40 * TOKEN_US, rel=1e-9)
    # each stage is busy its own time per token: utilisation = stage time / token time
    assert res.stage_utilization == pytest.approx([t / TOKEN_US for t in STAGE_US], rel=1e-9)
    assert res.bubble_fraction == pytest.approx(1 - sum(STAGE_US) / 3 / TOKEN_US, rel=1e-9)


def test_saturated_pipeline_runs_at_micro_batch_over_bottleneck():
    b = 4
    bottleneck = 25 + (4e6 + b * 4000) / BW               # stage 0 with four requests: 33.032 us
    res = simulate(_inst(LINEAR), ROUTE, Traffic(requests=40, output_tokens=400), Serving(micro_batch=b))
    assert res.pipeline_bound_tokens_per_s == pytest.approx(b * 1e6 / bottleneck, rel=1e-9)
    assert res.aggregate_tokens_per_s == pytest.approx(b * 1e6 / bottleneck, rel=0.01)
    assert res.stage_utilization[0] == pytest.approx(1.0, abs=0.01)
    assert res.stage_utilization[1] < 0.8                 # 25.016 / 33.032 busy
    # ten micro-batches share the bottleneck: each request gets a token every 10 x 33.032 us
    assert res.itl_p50_us == pytest.approx(10 * bottleneck, rel=1e-6)
    assert res.per_user_tokens_per_s == pytest.approx(1e6 / (10 * bottleneck), rel=1e-3)


def test_energy_figures_follow_power_and_throughput():
    res = simulate(_inst(LINEAR), ROUTE, Traffic(requests=12, output_tokens=50), Serving(micro_batch=2))
    assert res.power_w == 3 * 25_000
    assert res.tokens_per_s_per_mw == pytest.approx(res.aggregate_tokens_per_s / 0.075, rel=1e-12)
    assert res.joules_per_token == pytest.approx(75_000 / res.aggregate_tokens_per_s, rel=1e-12)
    assert res.joules_per_token * res.tokens_per_s_per_mw == pytest.approx(1e6, rel=1e-12)


DENSE = model_from_dict({"name": "dense2", "layers": [
    {"kind": "attention", "weight_bytes": 4_000_000, "kv_bytes_per_token": 1000},
    {"kind": "linear_attention", "weight_bytes": 1_000_000, "state_bytes_per_request": 1000},
]})


def test_kv_reserve_caps_live_requests():
    inst = _inst(DENSE, context=1000)
    # (10 MB - 4 MB of weights) / (1000 B x 1000 tokens) = 6 requests on the dense wafer
    assert inst.max_concurrency((0,), 0) == 6
    res = simulate(inst, (0, 1), Traffic(requests=20, output_tokens=20, decode_only=True))
    assert res.concurrency_cap == 6 and res.live_requests == 6
    assert res.requests_completed == 20 and res.tokens == 20 * 20
    # half the context: twice the requests fit (floor(6e6 / 5e5) = 12)
    res = simulate(inst, (0, 1), Traffic(requests=20, output_tokens=20, context=500, decode_only=True))
    assert res.concurrency_cap == 12 and res.live_requests == 12
    res = simulate(inst, (0, 1), Traffic(requests=20, output_tokens=20, max_live=4, decode_only=True))
    assert res.concurrency_cap == 4 and res.live_requests == 4
    # a request longer than the reserve cannot run at all
    with pytest.raises(Exception, match="KV reserve"):
        simulate(inst, (0, 1), Traffic(requests=2, context=7000))


def test_kv_reads_grow_with_each_token():
    inst = _inst(DENSE, context=1000)
    res = simulate(inst, (0, 1), Traffic(requests=1, output_tokens=30, decode_only=True),
                   run=RunSettings(trace=True))
    steps = [iv for iv in res.trace if iv.stage == 0]
    assert len(steps) == 30
    for j, iv in enumerate(steps):
        # stage 0: 5 + 10 + (4e6 weights + 1000 B x (970 prompt + j) cached tokens) / BW
        assert iv.end - iv.start == pytest.approx(15 + (4e6 + 1000 * (970 + j)) / BW, rel=1e-12)
    assert res.itl_p99_us > res.itl_p50_us


def test_prefill_gives_time_to_first_token():
    inst = _inst(DENSE, context=1000)
    res = simulate(inst, (0, 1), *split_options(requests=1, output_tokens=10, prefill=True))
    # prompt of 990 tokens: weights once + its KV written; state read and written once
    pre = (15 + (4e6 + 1000 * 990) / BW) + 2.0 + (15 + (1e6 + 2 * 1000) / BW)
    assert res.ttft_p50_us == pytest.approx(pre, rel=1e-9)
    assert res.tokens == 10


def test_poisson_arrivals_below_capacity_are_served_at_their_rate():
    rate, out = 2000.0, 20          # requests/s; the pipeline serves about 30k tokens/s alone
    res = simulate(_inst(LINEAR), ROUTE,
                   Traffic(arrival_rate=rate, duration_s=0.5, output_tokens=out, max_live=64),
                   Serving(micro_batch=4), RunSettings(seed=3))
    assert res.aggregate_tokens_per_s == pytest.approx(rate * out, rel=0.1)
    assert res.requests == pytest.approx(rate * 0.5, rel=0.15)
    assert 1 <= res.live_requests_mean < res.live_requests <= 64


def test_moe_reads_the_experts_a_micro_batch_touches():
    c = NodeCost(name="moe", weight_bytes=1000 + 8 * 100, active_weight_bytes=1000 + 2 * 100, always_bytes=1000,
                 expert_bytes=100, num_experts=8, experts_per_token=2)
    assert c.weight_bytes_read(1) == pytest.approx(1200)
    assert c.weight_bytes_read(2) == pytest.approx(1000 + 8 * (1 - (6 / 8) ** 2) * 100)   # 3.5 experts
    assert c.weight_bytes_read(1000) == pytest.approx(1800)


@pytest.mark.parametrize("text, kind, mean", [
    ("256k", "fixed", 262144), ("fixed:1000", "fixed", 1000), ("uniform:1k:3k", "uniform", 2048),
    ("choice:1000,3000", "choice", 2000), ("lognormal:1000:0", "lognormal", 1000),
])
def test_context_distributions(text, kind, mean):
    d = parse_context_dist(text)
    assert d.kind == kind and d.mean == pytest.approx(mean)


@pytest.mark.parametrize("text", ["uniform:3k:1k", "gamma:1:2", "uniform:abc:1k", "lognormal:1k:9", "choice:"])
def test_bad_context_distributions(text):
    with pytest.raises(InvalidSpec, match="context_dist"):
        parse_context_dist(text)


def test_context_distribution_changes_the_cap_and_load():
    inst = _inst(DENSE, context=1000)
    res = simulate(inst, (0, 1),
                   Traffic(requests=30, output_tokens=10, context_dist="uniform:200:1000", decode_only=True),
                   run=RunSettings(seed=1))
    assert res.concurrency_cap is None          # not a single context: admission is by bytes
    assert 6 < res.live_requests <= 30          # shorter requests: more than 6 fit at once
    assert res.requests_completed == 30


def test_bad_simulation_arguments():
    inst = _inst(LINEAR)
    for kw, field in [(dict(micro_batch=0), "micro_batch"), (dict(output_tokens=0), "output_tokens"),
                      (dict(arrival_rate=-1.0), "arrival_rate"), (dict(duration_s=0.0), "duration"),
                      (dict(max_live=0), "max_live"), (dict(context=10, context_dist="fixed:10"), "context_dist"),
                      (dict(requests=0), "requests")]:
        with pytest.raises(InvalidSpec, match=field):
            simulate(inst, ROUTE, *split_options(**kw))
    assert math.isfinite(simulate(inst, ROUTE, Traffic(requests=1, output_tokens=2)).unloaded_token_latency_us)


def test_layer_overhead_counts_a_layer_once_per_device():
    sharded = refine(LINEAR, "shards:2")
    inst = make_instance(LINEAR, FLEET, Workload(context_tokens=1000), mode="split", granularity="shards:2")
    assert [x.name for x in inst.nodes][:3] == ["layers.0.shard0", "layers.0.shard1", "layers.1.shard0"]
    assert len(sharded.layers) == 8
    # layer 0 whole on device 0; layer 1 cut between devices 0 and 1; layers 2, 3 on device 1
    segs = segments_of(inst, (0, 0, 0, 1, 1, 1, 1, 1))
    assert [s.layers for s in segs] == [2, 3]
    # device 0: 5 + 2 x 10 + (2e6 + 1e6 weights + state of layers 0 and 1 (shard 0 holds it)) / BW
    assert segs[0].time_us([1000]) == pytest.approx(25 + (3e6 + 2 * 2000) / BW, rel=1e-12)
    assert segs[1].time_us([1000]) == pytest.approx(35 + (1e6 + 8e6 + 2 * 2000) / BW, rel=1e-12)


def test_a_run_carries_its_traffic_resolved():
    """The result states the traffic it ran, defaults filled in: the live cap, the context, the cache."""
    res = simulate(_inst(LINEAR), ROUTE, *split_options(requests=5, output_tokens=10))
    assert res.requests == 15                   # three rounds of five users: the line says so
    assert res.traffic.describe() == ("traffic: closed loop of 5 live requests (15 requests: at least 3 per user), "
                                      "each a 990-token prompt (0 cached) then 10 output tokens")
    assert res.to_dict()["traffic"]["text"] == res.traffic.describe()
    poisson = simulate(_inst(LINEAR), ROUTE, Traffic(arrival_rate=2000.0, duration_s=0.05, output_tokens=20,
                                                     max_live=64), Serving(micro_batch=4), RunSettings(seed=3))
    assert poisson.traffic.describe().startswith("traffic: open Poisson arrivals at 2000 requests/s for 0.05 s, "
                                                 "at most 64 live, each a 980-token prompt (0 cached)")
