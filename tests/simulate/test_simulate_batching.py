"""Continuous batching against closed forms, and against the micro-batch schedule.

The hand-made fleet of ``test_simulate``: 1 TB/s x 0.5 = 500,000 B/us, 1 PFLOP/s x 0.5 = 5e8
FLOP/us, 10 us per layer, 5 us per stage visit, 2 us hops. Every expected time below is the cost
model's formula evaluated by hand, not a call into it.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from placer.problem.instance import make_instance
from placer.simulate import RunSettings, Serving, Traffic, simulate, split_options
from placer.simulate.cost import Collective, collective_time_us, expert_parallel, segments_of, tensor_parallel
from placer.simulate.des import RUNTIME_MAX_BATCH
from placer.specs.errors import InfeasiblePlacement, InvalidSpec
from placer.specs.fleet import fleet_from_dict
from placer.specs.model import model_from_dict
from placer.specs.workload import Workload

FLEET = fleet_from_dict({
    "name": "hand", "device": {"memory": "10 MB", "memory_bandwidth": "1 TB/s", "compute": "1 PFLOPS",
                               "power": "25 kW",
                               "perf": {"fixed_overhead_us_per_layer": 10, "fixed_overhead_us_per_stage": 5,
                                        "bandwidth_efficiency": 0.5, "compute_efficiency": 0.5}},
    "fleet": {"racks": 1, "per_rack": 4, "intra_rack_latency_us": 2, "inter_rack_latency_us": 3}})
# the same devices, eight of them, with links slow enough that serialising activations counts
DEEP = fleet_from_dict({
    "name": "deep", "device": FLEET.spec["device"],
    "fleet": {"racks": 2, "per_rack": 4, "intra_rack_latency_us": 2, "inter_rack_latency_us": 3,
              "intra_rack_bandwidth": "10 GB/s", "inter_rack_bandwidth": "1 GB/s"}})
BW, FL = 500_000.0, 5e8      # B/us, FLOP/us

LINEAR = model_from_dict({"name": "linear4", "layers": [
    {"kind": "linear_attention", "weight_bytes": 2_000_000, "state_bytes_per_request": 1000},
    {"kind": "linear_attention", "weight_bytes": 2_000_000, "state_bytes_per_request": 1000},
    {"kind": "linear_attention", "weight_bytes": 5_000_000, "state_bytes_per_request": 1000},
    {"kind": "linear_attention", "weight_bytes": 3_000_000, "state_bytes_per_request": 1000},
]})
ROUTE = (0, 0, 1, 2)


def stage_us(b: int) -> list[float]:
    """LINEAR on ROUTE with b requests: overhead + layers x 10 + (weights + b x 2 x 1000 B state per layer) / BW."""
    return [5 + 20 + (4e6 + b * 4000) / BW, 5 + 10 + (5e6 + b * 2000) / BW, 5 + 10 + (3e6 + b * 2000) / BW]


def _inst(model, context=1000):
    return make_instance(model, FLEET, Workload(context_tokens=context))


def test_continuous_is_the_default_and_reported():
    res = simulate(_inst(LINEAR), ROUTE, Traffic(requests=3, output_tokens=4))
    assert res.schedule == "continuous" and res.runtime == "vllm"
    assert res.max_batch == RUNTIME_MAX_BATCH["vllm"] == 256
    assert simulate(_inst(LINEAR), ROUTE, Traffic(requests=3, output_tokens=4), Serving(micro_batch=2)).schedule == "micro-batch"
    assert "schedule" in res.to_dict() and "max_batch" in res.to_dict()


def test_one_request_latency_is_stage_times_plus_hops():
    res = simulate(_inst(LINEAR), ROUTE, Traffic(requests=1, output_tokens=25),
                   Serving(schedule="continuous"))
    token = sum(stage_us(1)) + 2 * 2.0                  # 33.008 + 25.004 + 21.004 + two hops
    assert token == pytest.approx(83.016)
    assert res.itl_p50_us == pytest.approx(token, rel=1e-12) and res.itl_p99_us == pytest.approx(token, rel=1e-12)
    assert res.window_us == pytest.approx(25 * token, rel=1e-12)
    assert res.batch_mean == 1.0


def test_saturated_pipeline_runs_at_batch_over_bottleneck_stage_time():
    b, n = 4, 40
    bottleneck = stage_us(b)[0]                          # 25 + (4e6 + 16,000) / BW = 33.032 us
    assert bottleneck == pytest.approx(33.032)
    res = simulate(_inst(LINEAR), ROUTE, Traffic(requests=n, output_tokens=300, decode_only=True),
                   Serving(max_batch=b))
    assert res.pipeline_bound_tokens_per_s == pytest.approx(b * 1e6 / bottleneck, rel=1e-12)
    assert res.aggregate_tokens_per_s == pytest.approx(b * 1e6 / bottleneck, rel=0.01)
    assert res.stage_utilization[0] == pytest.approx(1.0, abs=0.01)
    # ten batches of four take turns on stage 0: a token every 10 x 33.032 us
    assert res.itl_p50_us == pytest.approx(n / b * bottleneck, rel=1e-9)
    assert res.batch_mean == pytest.approx(b)


ONE = model_from_dict({"name": "one", "layers": [
    {"kind": "attention", "params": 1_000_000, "kv_elements_per_token": 500, "kv_bytes_per_token": 1000},
]})


@pytest.mark.parametrize("b", [1, 2, 3, 8, 16])
def test_batch_sweep_on_one_stage_matches_the_formula(b):
    # one device, one 16-bit attention layer of 1e6 params (2 MB) with 1000 B (500 elements) of KV per
    # token, 400-token requests (the reserve holds 8e6 / 400,000 = 20): all b requests step
    # together; at step j each has its 380-token prompt + j tokens cached
    inst = make_instance(ONE, FLEET, Workload(context_tokens=400))
    out = 20
    res = simulate(inst, (0,), Traffic(requests=b, output_tokens=out, decode_only=True),
                   run=RunSettings(trace=True))
    steps = [iv for iv in res.trace if iv.stage == 0]
    assert [iv.batch for iv in steps] == [b] * out
    for j, iv in enumerate(steps):
        cached = b * (400 - out + j)
        # two operations, each at its roofline: the weights' GEMM (2 MB read once, 2 FLOPs per
        # param per token) and attention over the KV (1000 B and 2 x 500 FLOPs per cached token)
        gemm = max(2_000_000 / BW, b * 2 * 1_000_000 / FL)
        attention = max(1000 * cached / BW, 2 * 500 * cached / FL)
        assert iv.end - iv.start == pytest.approx(5 + 10 + gemm + attention, rel=1e-12)
    assert res.tokens == b * out


def test_batch_limit_and_kv_reserve_cap_each_step():
    inst = make_instance(ONE, FLEET, Workload(context_tokens=1000))
    res = simulate(inst, (0,), Traffic(requests=8, output_tokens=5, decode_only=True), Serving(max_batch=3),
                   RunSettings(trace=True))
    # 8 requests of 5 tokens, at most 3 per step, a served batch queueing behind the waiting ones:
    # every step is full until the last of the 40 tokens, ceil(40 / 3) = 14 steps
    assert [iv.batch for iv in res.trace] == [3] * 13 + [1]
    # (10 MB - 2 MB) / (1000 B x 1000 tokens) = 8 requests fit; at 2,000 tokens only 4
    res = simulate(inst, (0,), Traffic(requests=8, output_tokens=5, context=2000, decode_only=True),
                   run=RunSettings(trace=True))
    assert res.concurrency_cap == 4 and max(iv.batch for iv in res.trace) == 4


def test_bad_schedule_arguments():
    inst = _inst(LINEAR)
    for kw, field in [(dict(schedule="fifo"), "schedule"), (dict(max_batch=0), "max_batch"),
                      (dict(runtime="nope"), "runtime"), (dict(schedule="continuous", micro_batch=2), "micro_batch"),
                      (dict(schedule="micro-batch", max_batch=2), "max_batch")]:
        with pytest.raises(InvalidSpec, match=field):
            simulate(inst, ROUTE, *split_options(requests=1, output_tokens=1, **kw))


def test_collective_times():
    # ring all-reduce of 1 MB over 4 ranks, 2 us links at 100 GB/s: 6 steps of 2 + 250,000 / 100,000 us
    assert collective_time_us("all_reduce", 4, 1e6, 2.0, 100e9) == pytest.approx(6 * 4.5)
    assert collective_time_us("all_to_all", 4, 1e6, 2.0, 100e9) == pytest.approx(3 * 4.5)
    assert collective_time_us("all_reduce", 1, 1e6, 2.0, 100e9) == 0.0
    assert collective_time_us("all_reduce", 8, 0, 3.0, None) == pytest.approx(14 * 3.0)
    with pytest.raises(ValueError, match="collective"):
        collective_time_us("broadcast", 2, 1, 1, None)
    # a segment with collectives adds them to its step time, scaled by the batch's tokens
    seg = segments_of(_inst(LINEAR), ROUTE)[0]
    from dataclasses import replace
    tp = replace(seg, collectives=(Collective("all_reduce", 2, 8192, count=2, latency_us=2.0,
                                              bandwidth_bytes_per_s=450e9),))
    extra = 2 * 2 * (2.0 + 4 * 8192 / 2 / 450_000)
    assert tp.time_us([1000] * 4) == pytest.approx(seg.time_us([1000] * 4) + extra, rel=1e-12)
    # the usual groups: TP8 over 80 layers is 160 all-reduces; EP8 with 8 experts per token over 58
    # MoE layers is 116 all-to-alls of 8 hidden states per token
    t = tensor_parallel(8, 16384, 80, 2.0, 450e9)
    assert (t.kind, t.count) == ("all_reduce", 160)
    assert t.time_us(1) == pytest.approx(160 * 14 * (2.0 + 16384 / 8 / 450_000))
    e = expert_parallel(8, 14336, 8, 58, 4.0, 50e9)
    assert (e.kind, e.count, e.bytes_per_token) == ("all_to_all", 116, 8 * 14336)
    assert e.time_us(2) == pytest.approx(116 * 7 * (4.0 + 2 * 8 * 14336 / 8 / 50_000))


# 1-9 layers of 50 kB-1.5 MB on up to 8 devices (a placement holding more than a device's 10 MB is
# skipped), 0-1,536 activation elements per token
MODEL_LAYERS = st.lists(st.tuples(st.sampled_from(["attention", "linear_attention"]), st.integers(1, 30),
                                  st.integers(0, 3)), min_size=1, max_size=9)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layers=MODEL_LAYERS, cuts=st.lists(st.booleans(), min_size=8, max_size=8), requests=st.integers(1, 24),
       out=st.integers(1, 6), max_batch=st.one_of(st.none(), st.integers(1, 6)),
       ctx=st.integers(50, 400))
def test_continuous_never_worse_than_micro_batch_1(layers, cuts, requests, out, max_batch, ctx):
    spec = []
    for kind, w, act in layers:
        e = {"kind": kind, "weight_bytes": w * 50_000, "activation_elements_per_token": act * 512}
        e.update({"kv_bytes_per_token": 200} if kind == "attention" else {"state_bytes_per_request": 2000})
        spec.append(e)
    model = model_from_dict({"name": "h", "layers": spec})
    route, d = [], 0
    for i in range(len(spec)):
        if i and cuts[i - 1] and d < 7:
            d += 1
        route.append(d)
    inst = make_instance(model, DEEP, Workload(context_tokens=ctx))
    try:
        mb1 = simulate(inst, route, Traffic(requests=requests, output_tokens=out, decode_only=True),
                       Serving(micro_batch=1))
    except InfeasiblePlacement:          # more weights on one device than it holds
        assume(False)
    cont = simulate(inst, route, Traffic(requests=requests, output_tokens=out, decode_only=True),
                    Serving(max_batch=max_batch))
    assert cont.tokens == mb1.tokens == requests * min(out, ctx - 1)
    assert cont.window_us <= mb1.window_us * (1 + 1e-9)
    assert cont.aggregate_tokens_per_s >= mb1.aggregate_tokens_per_s * (1 - 1e-9)
    # every user waits no longer for the whole answer on average (the gap between two tokens may
    # grow: a batch step reads more than a single request's)
    assert cont.completion_mean_us <= mb1.completion_mean_us * (1 + 1e-9)


def test_a_poisson_stream_is_served_at_its_rate_under_the_bound():
    rate, out = 2000.0, 20          # requests/s; batches form from whatever has arrived
    res = simulate(_inst(LINEAR), ROUTE,
                   Traffic(arrival_rate=rate, duration_s=0.5, output_tokens=out, max_live=64),
                   run=RunSettings(seed=3))
    assert res.schedule == "continuous"
    assert res.aggregate_tokens_per_s == pytest.approx(rate * out, rel=0.1)
    assert res.aggregate_tokens_per_s <= res.pipeline_bound_tokens_per_s
    assert 1 < res.batch_mean < 64
