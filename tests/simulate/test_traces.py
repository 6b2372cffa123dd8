"""The trace readers (Mooncake JSONL, BurstGPT CSV, the simple CSV) on hand-made rows, values
checked by hand; the committed sample traces; a run replaying a trace; the length forms."""

import json
from pathlib import Path

import pytest

from placer.simulate.arguments import Traffic, parse_cached, resolve_lengths
from placer.simulate.contexts import parse_context_dist
from placer.simulate.traces import MOONCAKE_BLOCK_TOKENS, read_trace
from placer.specs.errors import InvalidSpec

FIXTURES = Path(__file__).parents[1] / "fixtures" / "traces"


def _lines(path: Path, *records) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return path


def test_mooncake_rows_and_the_prefix_cache_from_hash_ids(tmp_path):
    path = _lines(tmp_path / "t.jsonl",
                  {"timestamp": 1000, "input_length": 1000, "output_length": 10, "hash_ids": [1, 2]},
                  {"timestamp": 1500, "input_length": 1200, "output_length": 20, "hash_ids": [1, 2, 3]},
                  {"timestamp": 2000, "input_length": 700, "output_length": 5, "hash_ids": [9, 1]},
                  {"timestamp": 3000, "input_length": 600, "output_length": 7, "hash_ids": [1, 2, 3]})
    t = read_trace(path)
    assert t.format == "mooncake" and len(t.rows) == 4
    # ms from the first request, in seconds
    assert [r.arrival_s for r in t.rows] == [0.0, 0.5, 1.0, 2.0]
    assert [(r.input_tokens, r.output_tokens) for r in t.rows] == [(1000, 10), (1200, 20), (700, 5), (600, 7)]
    # the leading blocks every one of which an earlier request carried, 512 tokens each, at most the prompt:
    # none seen yet; blocks 1, 2 seen (block 3 new); block 9 new (1 after it does not count); 3 blocks > 600 tokens
    assert MOONCAKE_BLOCK_TOKENS == 512
    assert [r.cached_tokens for r in t.rows] == [0, 1024, 0, 600]
    assert t.longest == 1220 and t.rate == pytest.approx(3 / 2.0)


def test_burstgpt_rows_leave_out_failed_requests(tmp_path):
    path = tmp_path / "b.csv"
    path.write_text("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                    "10,ChatGPT,400,50,450,Conversation log\n"
                    "12.5,GPT-4,1000,0,1000,API log\n"
                    "13,ChatGPT,300,20,320,API log\n"
                    "20.25,GPT-4,2000,700,2700,Conversation log\n")
    t = read_trace(path)
    assert t.format == "burstgpt"
    assert [(r.arrival_s, r.input_tokens, r.output_tokens, r.cached_tokens) for r in t.rows] == [
        (0.0, 400, 50, 0), (3.0, 300, 20, 0), (10.25, 2000, 700, 0)]


def test_simple_csv_with_and_without_cached_tokens(tmp_path):
    a = tmp_path / "a.csv"
    a.write_text("arrival_s,input_tokens,output_tokens,cached_tokens\n0.5,1000,100,900\n0.25,2000,10,\n")
    t = read_trace(a)
    assert t.format == "csv"
    assert [(r.arrival_s, r.input_tokens, r.output_tokens, r.cached_tokens) for r in t.rows] == [
        (0.0, 2000, 10, 0), (0.25, 1000, 100, 900)]
    b = tmp_path / "b.csv"
    b.write_text("arrival_s,input_tokens,output_tokens\n0,8,2\n")
    assert read_trace(b).rows[0].cached_tokens == 0


@pytest.mark.parametrize("name, text, field", [
    ("c.csv", "arrival_s,input_tokens,output_tokens,cached_tokens\n0,100,10,200\n", "row 2: cached_tokens"),
    ("c.csv", "arrival_s,input_tokens\n0,100\n", "trace"),
    ("c.csv", "arrival_s,input_tokens,output_tokens\nsoon,100,10\n", "row 2: arrival_s"),
    ("c.csv", "arrival_s,input_tokens,output_tokens\n0,100,0\n", "row 2: output_tokens"),
    ("m.jsonl", '{"timestamp": 0, "input_length": 5}\n', "line 1: output_length"),
    ("m.jsonl", '{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": 3}\n', "line 1: hash_ids"),
    ("m.jsonl", "not json\n", "line 1"),
])
def test_a_malformed_trace_names_the_file_and_the_field(tmp_path, name, text, field):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(InvalidSpec) as e:
        read_trace(path)
    assert e.value.source == str(path) and e.value.field == field
    assert "\n" not in str(e.value)


def test_the_committed_sample_traces_read():
    for name, fmt, n in (("mooncake_sample.jsonl", "mooncake", 36), ("burstgpt_sample.csv", "burstgpt", 38),
                         ("simple_sample.csv", "csv", 30)):
        t = read_trace(FIXTURES / name)
        assert t.format == fmt and len(t.rows) == n and t.rows[0].arrival_s == 0.0
    shared = read_trace(FIXTURES / "mooncake_sample.jsonl")
    # every request after the first shares the 4-block system prompt: 2,048 tokens found in the cache at least
    assert all(r.cached_tokens >= 4 * 512 for r in shared.rows[1:])


def test_length_forms_and_their_parametrisation():
    assert parse_context_dist("uniform:1k-3k").values == (1024.0, 3072.0)
    d = parse_context_dist("lognormal:8k,0.5")
    assert d.kind == "lognormal" and d.values == (8192.0, 0.5)
    # the median is MEDIAN; the 99th percentile exp(2.326 sigma) above it
    assert d.percentile(50) == pytest.approx(8192)
    assert d.percentile(99) == pytest.approx(8192 * 3.20007, rel=1e-5)
    assert parse_cached("90%") == (0.9, 0) and parse_cached("8k") == (None, 8192)
    with pytest.raises(InvalidSpec):
        parse_cached("190%")


def test_the_standard_shape_is_cut_to_the_reserved_context():
    t, shapes = resolve_lengths(Traffic(), 128 * 1024, {})
    assert (t.prompt_tokens, t.output_tokens, t.cached_prompt_tokens) == (8192, 1024, 0)
    t, _ = resolve_lengths(Traffic(), 4096, {})
    assert (t.prompt_tokens, t.output_tokens) == (3072, 1024)
    t, _ = resolve_lengths(Traffic(), 1000, {})
    assert (t.prompt_tokens, t.output_tokens) == (500, 500)
    # a model spec's default replaces it (kimi-k3's agent turns), flags replace the spec's
    spec = {"isl": 261632, "osl": 512, "cached_prompt": "86%"}
    t, shapes = resolve_lengths(Traffic(), 262144, spec)
    assert (t.prompt_tokens, t.output_tokens, t.cached_share) == (261632, 512, 0.86)
    assert shapes.draw(None, 0) == (261632, 512, int(0.86 * 261632))
    t, _ = resolve_lengths(Traffic(prompt_tokens=1000, cached_prompt_tokens=0), 262144, spec)
    assert (t.prompt_tokens, t.output_tokens, t.cached_prompt_tokens, t.cached_share) == (1000, 512, 0, None)


def test_kimi_k3_keeps_its_agent_context_by_default():
    from placer import load_model

    m = load_model("kimi-k3")
    assert m.default_traffic == {"isl": 261632, "osl": 512, "cached_prompt": "86%",
                                 "source": m.default_traffic["source"]}
    assert 261632 + 512 == m.default_workload["context"] == 262144


def test_a_run_replays_a_trace_at_its_timestamps_or_draws_its_lengths_in_a_closed_loop():
    from placer import load_fleet, load_model, make_instance
    from placer.algorithms import place
    from placer.simulate.des import Simulation
    from placer.specs.workload import workload_for

    m = load_model("llama-3.1-8b")
    inst = make_instance(m, load_fleet("h100", racks=1), workload_for(m, context="16k", concurrency=8))
    res = place(inst, method="dp")
    trace = read_trace(FIXTURES / "simple_sample.csv")
    sim = Simulation(inst, res.assignment, Traffic(replay=trace))
    out = sim.run()
    assert out.requests == len(trace.rows) and not sim.closed_loop
    assert [(r.prompt, r.output) for r in sim.reqs] == [(row.input_tokens, row.output_tokens) for row in trace.rows]
    assert [sim.shapes.draw(None, i) for i in range(len(trace.rows))] == [
        (row.input_tokens, row.output_tokens, min(row.cached_tokens, row.input_tokens - 1)) for row in trace.rows]
    assert [r.arrival for r in sim.reqs] == pytest.approx([row.arrival_s * 1e6 for row in trace.rows])
    assert out.traffic.to_dict()["shape"] == "trace" and "simple_sample.csv" in out.traffic.describe()
    # scaled to a rate: the same order, the mean gap 1 / rate
    fast = Simulation(inst, res.assignment, Traffic(replay=trace, arrival_rate=20.0))
    fast.run()
    assert fast.reqs[-1].arrival == pytest.approx((len(trace.rows) - 1) / 20.0 * 1e6)
    closed = Simulation(inst, res.assignment, Traffic(replay=trace, closed_loop=True, max_live=4, requests=4))
    closed.run()
    assert closed.closed_loop and [r.prompt for r in closed.reqs[:4]] == [r.input_tokens for r in trace.rows[:4]]
