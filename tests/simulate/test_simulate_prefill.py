"""Chunked prefill and the closed loop against hand computation.

The hand-made fleet of ``test_simulate``: 1 TB/s x 0.5 = 500,000 B/us, 1 PFLOP/s x 0.5 = 5e8
FLOP/us, 10 us per layer, 5 us per stage visit, 2 us hops. ONE is a single 16-bit attention layer
of 1e6 params (2 MB) with 1000 B (500 elements) of KV per token. Every expected time is the
formula of placer.simulate.prefill evaluated by hand, not a call into it.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_simulate import FLEET

from placer.problem.instance import make_instance
from placer.simulate import RunSettings, Serving, Simulation, Traffic, segments_of, simulate, split_options
from placer.simulate.prefill import Chunk, chunk_time_us, prompt_time_us, step_time_us, sum_min
from placer.specs.errors import InvalidSpec
from placer.specs.fleet import fleet_from_dict
from placer.specs.model import model_from_dict
from placer.specs.workload import Workload

BW, FL = 500_000.0, 5e8      # B/us, FLOP/us
ONE_SPEC = {"name": "one", "layers": [
    {"kind": "attention", "params": 1_000_000, "kv_elements_per_token": 500, "kv_bytes_per_token": 1000},
]}
ONE = model_from_dict(ONE_SPEC)


def tri(p: int) -> int:
    """1 + 2 + ... + p: the KV entries a causal prefill of p tokens reads (no window)."""
    return p * (p + 1) // 2


def chunk_only_us(start: int, n: int) -> float:
    """A step of one chunk and no decode: overheads, then two operations each at its roofline (the
    slower of its bytes and its FLOPs): the weights' GEMM (read once, 2 FLOPs per param per token)
    and attention (the prefix KV read and the chunk's written, 2 FLOPs per KV element read)."""
    return (15 + max(2e6 / BW, 2e6 * n / FL)
            + max(1000 * (start + n) / BW, 1000 * (tri(start + n) - tri(start)) / FL))


def test_sum_min_by_hand():
    assert sum_min(4, None) == 1 + 2 + 3 + 4
    assert sum_min(5, 2) == 1 + 2 + 2 + 2 + 2
    assert sum_min(0, None) == 0


def test_ttft_of_a_prompt_of_four_chunks():
    # 400-token requests, 20 generated: a 380-token prompt in chunks of 100, 100, 100 and 80
    inst = make_instance(ONE, FLEET, Workload(context_tokens=400))
    ttft = sum(chunk_only_us(s, n) for s, n in [(0, 100), (100, 100), (200, 100), (300, 80)])
    # = 4 x 15 + (4 x 2e6 + 1000 x (100 + 200 + 300 + 380)) / BW: at these sizes every operation is
    # bound by its bytes (a 100-token GEMM of 2e8 FLOPs takes 0.4 us against 4 us of weights)
    assert ttft == pytest.approx(60 + 17.96, rel=1e-12)
    assert prompt_time_us(segments_of(inst, (0,)), 380, 100) == pytest.approx(ttft, rel=1e-12)
    res = simulate(inst, (0,), Traffic(requests=1, output_tokens=20), Serving(max_num_batched_tokens=100),
                   RunSettings(trace=True))
    assert res.ttft_p50_us == pytest.approx(ttft, rel=1e-12) and res.ttft_p99_us == pytest.approx(ttft, rel=1e-12)
    # alone, the decodes after the first token are the decode-only step times
    decode = [15 + (2e6 + 1000 * (380 + j)) / BW for j in range(1, 20)]
    assert res.itl_p50_us == pytest.approx(float(np.percentile(decode, 50)), rel=1e-12)
    assert [iv.prefill_tokens for iv in res.trace[:5]] == [100, 100, 100, 80, 0]


def test_one_chunked_step_is_decode_part_plus_chunk_part():
    # two users of 400 tokens, budget 100 per step: A's prompt takes steps 1-4 (the fourth also
    # starts B's prompt with 20 tokens); step 5 decodes A's second token (381 tokens cached) and
    # prefills 99 more of B's (positions 20..118) in the same forward pass
    inst = make_instance(ONE, FLEET, Workload(context_tokens=400))
    sim = Simulation(inst, (0,), Traffic(requests=2, output_tokens=20), Serving(max_num_batched_tokens=100),
                     RunSettings(trace=True))
    res = sim.run()
    steps = [iv for iv in res.trace if iv.stage == 0]
    assert [(iv.batch, iv.prefill_tokens) for iv in steps[:6]] == [(0, 100), (0, 100), (0, 100), (0, 100),
                                                                   (1, 99), (1, 99)]
    decode_part = 15 + max(2e6 / BW, 2e6 / FL) + max(1000 * 381 / BW, 2 * 500 * 381 / FL)
    # one forward pass: the same GEMM over 100 tokens (the weights read once), attention over the
    # decode's 381 cached tokens and the chunk's 20 + 99
    step = (15 + max(2e6 / BW, 2e6 * 100 / FL)
            + max(1000 * (381 + 20 + 99) / BW, (2 * 500 * 381 + 1000 * (tri(119) - tri(20))) / FL))
    chunk_part = step - decode_part
    assert chunk_part == pytest.approx(1000 * (20 + 99) / BW, rel=1e-12)     # its KV bytes: 0.238 us
    assert steps[4].end - steps[4].start == pytest.approx(decode_part + chunk_part, rel=1e-12)
    seg = segments_of(inst, (0,))[0]
    assert chunk_time_us(seg, [Chunk(20, 99)], decodes=1) == pytest.approx(chunk_part, rel=1e-12)
    assert step_time_us(seg, 1, {None: 381.0}, [Chunk(20, 99)]) == pytest.approx(decode_part + chunk_part, rel=1e-12)
    # A's first inter-token gap is that shared step: prefill chunks count in the ITL under load
    a = sim.reqs[0]
    assert a.times[1] - a.times[0] == pytest.approx(decode_part + chunk_part, rel=1e-12)
    # B's first token comes with the step that ends its prompt: 20 + 99 + 99 + 99 + 63 = 380 tokens
    b = sim.reqs[1]
    assert b.first == pytest.approx(steps[7].end, rel=1e-12) and steps[7].prefill_tokens == 63


def test_closed_loop_replaces_each_finished_request_and_measures_the_steady_window():
    inst = make_instance(ONE, FLEET, Workload(context_tokens=400))
    sim = Simulation(inst, (0,), Traffic(requests=6, output_tokens=20), Serving(max_num_batched_tokens=100))
    res = sim.run()
    # six users (the reserve holds (10 MB - 2 MB) / 400,000 B = 20), at least three requests each
    assert res.closed_loop and res.users == 6 and res.requests == 18 == res.requests_completed
    by_user: dict[int, list] = {}
    for r in sim.reqs:
        by_user.setdefault(r.user, []).append(r)
    for reqs in by_user.values():
        assert reqs[0].arrival == 0.0
        # a user's next request arrives when its previous one has its last token
        assert [r.arrival for r in reqs[1:]] == [r.last for r in reqs[:-1]]
    # the window: from every user's first request done to the last request's arrival
    first_round = max(reqs[0].last for reqs in by_user.values())
    assert res.window_start_us == pytest.approx(first_round)
    assert res.window_us == pytest.approx(max(r.arrival for r in sim.reqs) - first_round)
    assert res.live_requests == 6 and res.max_num_batched_tokens == 100 and not res.decode_only
    inside = [t for r in sim.reqs for t in r.times if first_round < t <= first_round + res.window_us]
    assert res.tokens == len(inside)
    assert res.aggregate_tokens_per_s == pytest.approx(len(inside) / res.window_us * 1e6, rel=1e-12)
    ttft = [r.first - r.arrival for r in sim.reqs if r.arrival >= first_round]
    assert res.ttft_p50_us == pytest.approx(float(np.percentile(ttft, 50)), rel=1e-12)


def test_decode_only_keeps_the_decode_simulation():
    inst = make_instance(ONE, FLEET, Workload(context_tokens=400))
    res = simulate(inst, (0,), Traffic(requests=3, output_tokens=5, decode_only=True),
                   run=RunSettings(trace=True))
    assert res.decode_only and not res.closed_loop and res.ttft_p50_us is None
    assert res.requests == 3 and res.tokens == 15 and all(iv.prefill_tokens == 0 for iv in res.trace)
    # prefill=False is the older spelling; prefill=True is the default
    assert simulate(inst, (0,), *split_options(requests=3, output_tokens=5, prefill=False, trace=True)).to_dict() == res.to_dict()
    assert simulate(inst, (0,), *split_options(requests=1, output_tokens=5, prefill=True)).ttft_p50_us is not None


def test_micro_batch_slots_prefill_their_members():
    inst = make_instance(ONE, FLEET, Workload(context_tokens=400))
    res = simulate(inst, (0,), Traffic(requests=1, output_tokens=20),
                   Serving(micro_batch=1, max_num_batched_tokens=100))
    ttft = sum(chunk_only_us(s, n) for s, n in [(0, 100), (100, 100), (200, 100), (300, 80)])
    assert res.schedule == "micro-batch" and res.ttft_p50_us == pytest.approx(ttft, rel=1e-12)


def test_prefill_arguments_in_library_words():
    inst = make_instance(ONE, FLEET, Workload(context_tokens=400))
    for kw, field in [(dict(max_num_batched_tokens=0), "max_num_batched_tokens"), (dict(rounds=0), "rounds"),
                      (dict(prefill=True, decode_only=True), "decode_only"),
                      (dict(context=10, context_dist="fixed:10"), "context_dist")]:
        with pytest.raises(InvalidSpec) as exc:
            simulate(inst, (0,), *split_options(requests=1, output_tokens=1, **kw))
        assert (exc.value.source, exc.value.field) == ("<argument>", field)
        assert "--" not in exc.value.message


def test_simulate_command_closed_loop_and_decode_only(tmp_path, run_cli):
    from placer.algorithms import place
    from placer.mapping import build_mapping, write_mapping

    inst = make_instance(ONE, FLEET, Workload(context_tokens=400))
    doc = build_mapping(inst, place(inst, method="dp"))
    path = tmp_path / "one.json"
    write_mapping(path, doc)
    hw = tmp_path / "hand.yaml"
    import yaml
    hw.write_text(yaml.safe_dump(FLEET.spec))
    spec = tmp_path / "one.yaml"
    spec.write_text(yaml.safe_dump(ONE_SPEC))
    code, out, err = run_cli(["simulate", path, "-H", hw, "--model", spec, "--requests", 1, "--output-tokens", 20,
                              "--max-num-batched-tokens", 100, "--json"])
    assert code == 0, err
    import json
    d = json.loads(out)
    ttft = sum(chunk_only_us(s, n) for s, n in [(0, 100), (100, 100), (200, 100), (300, 80)])
    assert d["ttft_p50_us"] == pytest.approx(ttft, rel=1e-6) and d["closed_loop"] is True
    code, out, err = run_cli(["simulate", path, "-H", hw, "--model", spec, "--requests", 1, "--output-tokens", 20])
    assert code == 0, err
    assert "time to first token" in out and "closed loop of 1 users" in out
    code, out, err = run_cli(["simulate", path, "-H", hw, "--model", spec, "--requests", 1, "--output-tokens", 5, "--decode-only"])
    assert code == 0, err
    assert "decode only" in out and "time to first token" not in out
    code, out, err = run_cli(["simulate", path, "-H", hw, "--model", spec, "--decode-only", "--max-num-batched-tokens", 8])
    assert code == 2 and err.startswith("error: --max-num-batched-tokens: max_num_batched_tokens:")
    # the prefix cache from the command line: 250 of the 380 prompt tokens cached, as by hand above
    code, out, err = run_cli(["simulate", path, "-H", hw, "--model", spec, "--requests", 1, "--output-tokens", 20,
                              "--max-num-batched-tokens", 100, "--cached-prompt", 250, "--json"])
    assert code == 0, err
    d = json.loads(out)
    assert d["cached_prompt_tokens"] == 250
    assert d["ttft_p50_us"] == pytest.approx(chunk_only_us(250, 100) + chunk_only_us(350, 30), rel=1e-6)
    code, out, err = run_cli(["simulate", path, "-H", hw, "--model", spec, "--decode-only", "--cached-prompt", 250])
    assert code == 2 and err.startswith("error: --cached-prompt:")


def _with_mtp():
    """ONE plus a 500,000-param (1 MB) attention layer (1000 B, 500 elements of KV per token) as its
    multi-token-prediction layer."""
    from dataclasses import replace

    both = model_from_dict({"name": "one-mtp", "layers": [ONE_SPEC["layers"][0],
                                                          {"kind": "attention", "params": 500_000,
                                                           "kv_elements_per_token": 500, "kv_bytes_per_token": 1000}]})
    return replace(both, layers=(both.layers[0], replace(both.layers[1], kind="mtp", name="mtp.0")))


def test_one_speculative_step_drafts_verifies_and_accepts():
    inst = make_instance(_with_mtp(), FLEET, Workload(context_tokens=400))
    sim = Simulation(inst, (0, 0), Traffic(requests=1, output_tokens=20, decode_only=True),
                     Serving(spec_k=3, spec_accept=2.5), RunSettings(trace=True))
    res = sim.run()
    # step 1, 380 tokens cached: verify 3 drafts = a forward of 4 positions through the target layer
    # (the MTP layer runs only when drafting): 15 us + the weights' GEMM max(2e6 / BW, 2e6 x 4 / FL)
    # + attention max(1000 B x (380 read + 4 written) / BW, 1000 x (384 x 385 - 380 x 381) / 2 / FL)
    verify = 15 + max(2e6 / BW, 2e6 * 4 / FL) + max(1000 * 384 / BW, 1000 * 1530 / FL)
    assert verify == pytest.approx(19.768, rel=1e-12)
    # then 3 draft passes of the MTP layer for one position, each (5 + 10) us + max(1 MB / BW, 2 x 5e5
    # / FL) + max(its 380 cached tokens' KV / BW, 2 x 500 x 380 / FL)
    draft = 3 * (15 + max(1e6 / BW, 1e6 / FL) + max(1000 * 380 / BW, 1000 * 380 / FL))
    assert draft == pytest.approx(53.28, rel=1e-12)
    first, second = res.trace[0], res.trace[1]
    assert first.end - first.start == pytest.approx(verify, rel=1e-12)
    assert second.end - second.start == pytest.approx(draft, rel=1e-12) and second.start == pytest.approx(first.end)
    # accepted tokens: 2.5 per step on average, emitted whole: 2, 3, 2, 3, ... (the bonus token included)
    r = sim.reqs[0]
    assert r.times[:2] == [pytest.approx(verify + draft)] * 2 and r.times[2] > r.times[1]
    counts = [r.times.count(t) for t in sorted(set(r.times))]
    assert counts == [2, 3] * 4 and res.tokens == 20
    # step 2 starts at 382 cached tokens; its gap is shared by the 3 tokens it emits
    verify2 = 15 + max(2e6 / BW, 2e6 * 4 / FL) + max(1000 * 386 / BW, 1000 * 1538 / FL)
    draft2 = 3 * (15 + max(1e6 / BW, 1e6 / FL) + max(1000 * 382 / BW, 1000 * 382 / FL))
    assert r.times[2] - r.times[1] == pytest.approx(verify2 + draft2, rel=1e-12)
    gaps = [x for x in np.diff(sorted(set(r.times)))]
    assert res.itl_p99_us <= max(gaps) / 2 + 1e-9       # every step's gap shared by its 2 or 3 tokens
    assert res.spec_k == 3 and res.spec_accept == 2.5


def test_speculation_needs_mtp_layers_and_a_possible_acceptance():
    inst = make_instance(ONE, FLEET, Workload(context_tokens=400))
    with pytest.raises(InvalidSpec, match="spec_k: the placement has no MTP layers"):
        simulate(inst, (0,), Traffic(requests=1, output_tokens=4), Serving(spec_k=2, spec_accept=2.0))
    mtp = make_instance(_with_mtp(), FLEET, Workload(context_tokens=400))
    for kw, field in [(dict(spec_k=2, spec_accept=3.5), "spec_accept"), (dict(spec_k=2), "spec_k"),
                      (dict(spec_accept=2.0), "spec_accept"), (dict(spec_k=-1, spec_accept=1.0), "spec_k")]:
        with pytest.raises(InvalidSpec) as exc:
            simulate(mtp, (0, 0), *split_options(requests=1, output_tokens=4, **kw))
        assert exc.value.field == field
    # with prefill and the closed loop too: each verify step takes 1 + k tokens of the budget
    res = simulate(mtp, (0, 0), Traffic(requests=2, output_tokens=20),
                   Serving(spec_k=3, spec_accept=2.5, max_num_batched_tokens=100))
    assert res.closed_loop and res.ttft_p50_us is not None and res.tokens > 0


def test_a_long_chunk_is_compute_bound_at_the_rate_its_token_count_reaches():
    """A prompt chunk rides in the step's GEMMs: M = its tokens, at compute_efficiency x peak x
    M / (M + compute_half_saturation_tokens); a chunk of 1000 tokens through 1e6 params is 2e9
    FLOPs, at 5e8 x 1000 / 1100 FLOP/us 4.4 us, slower than the 2 MB of weights (4 us)."""
    spec = {"name": "hand2", "device": {"memory": "10 MB", "memory_bandwidth": "1 TB/s", "compute": "1 PFLOPS",
                                        "perf": {"fixed_overhead_us_per_layer": 10, "fixed_overhead_us_per_stage": 5,
                                                 "bandwidth_efficiency": 0.5, "compute_efficiency": 0.5,
                                                 "compute_half_saturation_tokens": 100}},
            "fleet": {"racks": 1, "per_rack": 4, "intra_rack_latency_us": 2, "inter_rack_latency_us": 3}}
    inst = make_instance(ONE, fleet_from_dict(spec), Workload(context_tokens=4000))
    (seg,) = segments_of(inst, (0,))
    assert seg.flops_per_us == pytest.approx(5e8) and seg.half_tokens == 100
    gemm = 2e6 * 1000 / 5e8 * 1100 / 1000
    attention = max(1000 * 1000 / BW, 1000 * tri(1000) / FL)
    assert gemm == pytest.approx(4.4) and gemm > 2e6 / BW
    assert chunk_time_us(seg, (Chunk(0, 1000),)) == pytest.approx(15 + gemm + attention, rel=1e-12)
    # one decode token alone: its GEMM is M = 1, 2e6 x 101 / 5e8 = 0.404 us against 4 us of weights
    assert step_time_us(seg, 1, {None: 10.0}, ()) == pytest.approx(15 + 4 + 1000 * 10 / BW, rel=1e-12)


def test_a_cached_prefix_is_not_prefilled_but_its_kv_is_read():
    """400-token requests, 20 generated, 250 of the 380 prompt tokens a prefix-cache hit: the
    prompt's remaining 130 tokens run as chunks of 100 and 30 after position 250, each reading the
    KV of the positions before it (cached ones included), by hand."""
    inst = make_instance(ONE, FLEET, Workload(context_tokens=400))
    ttft = chunk_only_us(250, 100) + chunk_only_us(350, 30)
    # = 2 x 15 + (2 x 2e6 + 1000 x (350 + 380)) / BW (every operation bound by its bytes)
    assert ttft == pytest.approx(30 + 9.46, rel=1e-12)
    assert prompt_time_us(segments_of(inst, (0,)), 380, 100, cached=250) == pytest.approx(ttft, rel=1e-12)
    res = simulate(inst, (0,), Traffic(requests=1, output_tokens=20, cached_prompt_tokens=250),
                   Serving(max_num_batched_tokens=100), RunSettings(trace=True))
    assert res.ttft_p50_us == pytest.approx(ttft, rel=1e-12) and res.cached_prompt_tokens == 250
    assert [iv.prefill_tokens for iv in res.trace[:3]] == [100, 30, 0]
    # a plan made with the prefix cache carries it: its instance, its mapping and a mapping's simulation
    from dataclasses import replace

    from placer.mapping import build_mapping, instance_from_mapping
    from placer.problem.placement import Status, evaluate

    cached = replace(inst, cached_prompt_tokens=250)
    assert simulate(cached, (0,), Traffic(requests=1, output_tokens=20), Serving(max_num_batched_tokens=100)).ttft_p50_us == \
        pytest.approx(ttft, rel=1e-12)
    doc = build_mapping(cached, evaluate(cached, [0], method="dp", status=Status.OPTIMAL))
    assert doc["prefix_cache"] == {"cached_prompt_tokens": 250}
    from placer.mapping.validate import validate_mapping

    assert validate_mapping(doc, model=ONE, fleet=FLEET) == []
    assert instance_from_mapping(doc, model=ONE, hardware=FLEET)[3].cached_prompt_tokens == 250
    # every token cached: one is still computed, so the first token comes from a step
    whole = simulate(inst, (0,), Traffic(requests=1, output_tokens=20, cached_prompt_tokens=10**6),
                     Serving(max_num_batched_tokens=100))
    assert whole.ttft_p50_us == pytest.approx(chunk_only_us(379, 1), rel=1e-12)
    with pytest.raises(InvalidSpec, match="cached_prompt_tokens"):
        simulate(inst, (0,), Traffic(requests=1, cached_prompt_tokens=-1))
