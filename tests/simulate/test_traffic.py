"""The traffic a simulated speed was measured under, in one line and as JSON (Traffic.describe / to_dict)."""

from __future__ import annotations

import pytest

from placer.simulate import Traffic
from placer.simulate.arguments import study_traffic
from placer.simulate.contexts import parse_context_dist
from placer.specs.errors import InvalidSpec


def test_closed_loop_line():
    t = Traffic(requests=184, max_live=184, context=262_144, output_tokens=32, cached_prompt_tokens=0)
    assert t.describe() == ("traffic: closed loop of 184 live requests (552 requests: at least 3 per user), "
                            "each a 262,112-token prompt (0 cached) then 32 output tokens")
    d = t.to_dict()
    assert d["shape"] == "closed_loop" and d["live_requests"] == 184 and d["prompt_tokens"] == 262_112
    assert d["text"] == t.describe() and d["rounds"] == 3


def test_decode_only_line():
    t = Traffic(requests=5, context=1000, output_tokens=32, decode_only=True)
    assert t.describe() == ("traffic: decode only (prompts already in the cache), 5 live requests at once, "
                            "each a 968-token context already in the cache then 32 output tokens")
    assert t.to_dict()["shape"] == "decode_only" and t.to_dict()["rounds"] is None


def test_cached_prompt_line():
    t = study_traffic(131_072, 16, {"cached_prompt_tokens": 102_400})
    assert t.describe("each point's live load") == (
        "traffic: closed loop at each point's live load (at least 3 requests per user), "
        "each a 8,192-token prompt (102,400 cached) then 16 output tokens")
    assert t.to_dict()["cached_prompt_tokens"] == 102_400


def test_poisson_line():
    t = Traffic(arrival_rate=5, duration_s=60, context=8192, output_tokens=1, max_live=64, cached_prompt_tokens=0)
    assert t.describe() == ("traffic: open Poisson arrivals at 5 requests/s for 60 s, at most 64 live, "
                            "each a 8,191-token prompt (0 cached) then 1 output token")
    assert t.to_dict()["shape"] == "poisson" and t.to_dict()["arrival_rate"] == 5


def test_context_distribution_line():
    t = Traffic(requests=4, context_dist=parse_context_dist("uniform:1k:3k"), output_tokens=8, cached_prompt_tokens=0)
    assert t.describe().endswith("each a context drawn from uniform:1024:3072 tokens: a prompt (0 cached) "
                                 "then 8 output tokens")
    assert t.to_dict()["context_dist"] == "uniform:1024:3072"


@pytest.mark.parametrize("text, words", [("lognormal:8k", "MEDIAN:SIGMA"), ("uniform:8k", "LO:HI")])
def test_malformed_distributions_say_what_they_need(text, words):
    with pytest.raises(InvalidSpec, match=words):
        parse_context_dist(text)


def test_a_study_without_a_context_names_the_workloads():
    assert Traffic(output_tokens=16, decode_only=True).describe() == (
        "traffic: decode only (prompts already in the cache), the KV reserve's live cap at once, "
        "each a prompt of min(8,192, the context less the output) tokens already in the cache then 16 output tokens")
    assert Traffic(output_tokens=16).describe("each row's concurrency") == (
        "traffic: closed loop at each row's concurrency (at least 3 requests per user), "
        "each a prompt of min(8,192, the context less the output) tokens (the instance's cached prefix) "
        "then 16 output tokens")
