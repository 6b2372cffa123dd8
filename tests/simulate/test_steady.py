"""The fast simulator path (placer.simulate.steady) against the event run: the battery of
benchmarks/bench_steady.py within the stated error, the same cost model, the traffic it declines,
and the searches that use it (speed floors confirm with the event run)."""

from __future__ import annotations

import sys

import pytest
from dirs import BENCHMARKS

from placer.simulate import Serving, Traffic, simulate
from placer.simulate.steady import STATED_ERROR, Unsupported, check_sim, simulate_with, steady
from placer.specs.errors import InvalidSpec

sys.path.insert(0, str(BENCHMARKS))
import bench_steady as battery  # noqa: E402


@pytest.mark.parametrize("source, options", battery.QUICK, ids=[f"{s}-{i}" for i, (s, _) in enumerate(battery.QUICK)])
def test_battery_case_within_the_stated_error(source, options):
    r = battery.run_case(source, options)
    assert r["fast"].method == "steady" and r["event"].method == "event"
    assert r["per_user"] is not None and abs(r["per_user"]) <= STATED_ERROR["per_user_tokens_per_s"]
    assert abs(r["aggregate"]) <= STATED_ERROR["aggregate_tokens_per_s"]
    e, f = r["event"], r["fast"]
    # power is counted alike, so tokens/s per MW carries the aggregate's error
    assert f.power_w == e.power_w
    if e.tokens_per_s_per_mw:
        assert abs(f.tokens_per_s_per_mw / e.tokens_per_s_per_mw - 1) <= STATED_ERROR["aggregate_tokens_per_s"]
    if r["event_ttft_mean_us"] is not None:
        assert abs(r["ttft"]) <= STATED_ERROR["aggregate_tokens_per_s"]
    assert f.window_us == pytest.approx(e.window_us, rel=0.05)
    assert (f.stage_time_us, f.pipeline_bound_tokens_per_s, f.unloaded_token_latency_us) == \
        (e.stage_time_us, e.pipeline_bound_tokens_per_s, e.unloaded_token_latency_us)


def _toy():
    inst, route, _ = battery.toy()
    return inst, route


def test_a_cost_model_change_reaches_both_paths(monkeypatch):
    """Both paths price a step by the cost model's own functions: doubling every segment's decode
    time halves both runs' per-user speed."""
    inst, route = _toy()
    traffic = Traffic(requests=6, output_tokens=32, decode_only=True)
    before = (simulate(inst, route, traffic).per_user_tokens_per_s, steady(inst, route, traffic).per_user_tokens_per_s)
    from placer.simulate.cost import Segment

    plain = Segment.duration_us
    monkeypatch.setattr(Segment, "duration_us", lambda self, t: 2 * plain(self, t))
    after = (simulate(inst, route, traffic).per_user_tokens_per_s, steady(inst, route, traffic).per_user_tokens_per_s)
    assert before[0] == pytest.approx(before[1], rel=1e-9)
    assert after[0] == pytest.approx(after[1], rel=1e-9)
    assert after[0] < 0.6 * before[0]


def test_what_the_fast_path_does_not_model_goes_to_the_event_run():
    inst, route = _toy()
    with pytest.raises(Unsupported, match="micro-batch"):
        steady(inst, route, Traffic(requests=4), Serving(micro_batch=2))
    with pytest.raises(Unsupported, match="distribution"):
        steady(inst, route, Traffic(requests=4, context_dist="uniform:500:1000"))
    sim = simulate_with("fast", inst, route, requests=4, micro_batch=2)
    assert sim.method == "event"
    assert simulate_with("fast", inst, route, requests=4).method == "steady"
    assert simulate_with("exact", inst, route, requests=4).method == "event"
    with pytest.raises(InvalidSpec, match="sim"):
        check_sim("quick")


def test_the_fast_path_checks_its_arguments_as_the_event_run():
    inst, route = _toy()
    with pytest.raises(InvalidSpec, match="output_tokens"):
        steady(inst, route, Traffic(output_tokens=0))


def test_a_result_says_which_path_made_it():
    inst, route = _toy()
    fast = steady(inst, route, Traffic(requests=3, output_tokens=16)).to_dict()
    exact = simulate(inst, route, Traffic(requests=3, output_tokens=16)).to_dict()
    assert (fast["method"], exact["method"]) == ("steady", "event")
    assert fast["ttft_mean_us"] is not None and exact["ttft_mean_us"] is None
    # both state the calibration's error band for the same regime (placer.simulate.error_band)
    assert fast["speed_error"] is not None and fast["speed_error"] == exact["speed_error"]


def test_a_speed_floor_search_confirms_the_fast_answer_with_the_event_run():
    from placer.planning.speed import concurrency_at_speed

    inst, route = _toy()
    floor = 10_000.0
    fast = concurrency_at_speed(inst, route, floor, cap=12, output_tokens=16, how="fast")
    exact = concurrency_at_speed(inst, route, floor, cap=12, output_tokens=16, how="exact")
    assert fast[0] == exact[0] >= 1
    assert fast[1].method == "event" and fast[1].per_user_tokens_per_s >= floor
    assert fast[1].per_user_tokens_per_s == exact[1].per_user_tokens_per_s
