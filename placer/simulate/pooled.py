"""Simulating a two-pool (disaggregated) mapping: each pool's replica simulated on its own, the
KV transfer added between them.

The composition, stated: the prefill replica runs Poisson arrivals at its share of the rate
(``rate / prefill replicas``), each request prefilled in chunks and emitting its first token
(``output_tokens=1``), so its TTFT is queueing plus prefill; the decode replica runs its live
requests decode-only (their prompts' KV arrives whole) and gives the token gaps. A request's
TTFT is the prefill replica's plus the transfer's ``latency + bytes / bandwidth`` (the mapping's
``transfer``); its TPOT is the decode replica's mean gap. The two are independent runs: a decode
replica's admissions are not paced by the prefill pool's departures.
"""

from __future__ import annotations

__all__ = ["simulate_pooled"]


def simulate_pooled(doc, *, model=None, output_tokens: int = 16, seed: int = 0) -> dict:
    """The figures of a two-pool mapping ``doc`` (the document or its
    :class:`~placer.mapping.view.PooledView`; see the module docstring): TTFT p50 / p99 (us), TPOT
    and ITL p50 / p99 (us), aggregate tokens/s and power over every replica, and whether the
    mapping's targets hold."""
    from placer.mapping.view import PooledView, mapping_view
    from placer.simulate.des import simulate_mapping
    from placer.specs.errors import InvalidSpec

    view = mapping_view(doc)
    if not isinstance(view, PooledView):
        raise InvalidSpec("<mapping>", "/schema_version", "a one-pool mapping: simulate it with simulate_mapping")
    reps, tg = view.replicas, view.targets
    rate = view.summary.rate
    share = rate / reps["prefill"]
    duration = max(200 / share, 50 * view.summary.prefill_ms / 1e3)
    pre = simulate_mapping(view.prefill, model=model, output_tokens=1, arrival_rate=share,
                           duration_s=duration, max_num_batched_tokens=tg.max_num_batched_tokens, seed=seed)
    load = view.summary.decode_load
    dec = simulate_mapping(view.decode, model=model, requests=load, max_live=load,
                           output_tokens=output_tokens, decode_only=True, seed=seed)
    transfer = view.transfer.time_us
    ttft50 = None if pre.ttft_p50_us is None else pre.ttft_p50_us + transfer
    ttft99 = None if pre.ttft_p99_us is None else pre.ttft_p99_us + transfer
    tpot = None if not dec.per_user_tokens_per_s else 1e6 / dec.per_user_tokens_per_s
    power = None if pre.power_w is None or dec.power_w is None else \
        reps["prefill"] * pre.power_w + reps["decode"] * dec.power_w
    agg = reps["decode"] * dec.aggregate_tokens_per_s
    meets = (ttft50 is not None and tpot is not None and ttft50 <= tg.max_ttft_ms * 1e3 * (1 + 1e-9)
             and tpot <= tg.tpot_ms * 1e3 * (1 + 1e-9))
    return {"kind": "disaggregated", "rate": rate, "replicas": dict(reps), "transfer_us": transfer,
            "ttft_p50_us": ttft50, "ttft_p99_us": ttft99, "tpot_us": tpot, "itl_p50_us": dec.itl_p50_us,
            "itl_p99_us": dec.itl_p99_us, "per_user_tokens_per_s": dec.per_user_tokens_per_s,
            "aggregate_tokens_per_s": agg, "power_w": power,
            "tokens_per_s_per_mw": agg / (power / 1e6) if power and agg else None,
            "meets_targets": bool(meets), "max_ttft_ms": tg.max_ttft_ms, "tpot_target_ms": tg.tpot_ms,
            "prefill": pre.to_dict(), "decode": dec.to_dict()}
