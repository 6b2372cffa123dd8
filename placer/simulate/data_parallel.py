"""A simulation of an attention-data-parallel placement, reported for the whole group.

The instance of an attention-data-parallel layout is its heaviest rank's (:mod:`placer.problem.reductions.attention_dp`):
the simulator runs one rank's share of the requests through the pipeline, every stage's step
costing that rank's attention over its own KV cache and the MoE layers' dispatch and combine
all-to-alls (:func:`placer.simulate.cost.attention_data_parallel`). The ``g`` ranks of a group
run the same steps side by side, so per-user speeds and latencies are the rank's, while the
group serves ``g`` times the requests and tokens at the power of all its devices (which the
simulator already counts). :func:`for_group` states the result that way.
"""

from __future__ import annotations

from dataclasses import replace

__all__ = ["for_group", "rank_traffic"]


def for_group(result, instance):
    """``result`` (a :class:`~placer.simulate.des.SimResult` of ``instance``) with its request and
    token counts and throughputs for the whole group: ``tp`` times the rank's under attention data
    parallelism (tokens per MW too, joules per token divided); ``result`` itself otherwise."""
    g = instance.requests_factor
    if g == 1:
        return result

    def times(x):
        return None if x is None else x * g

    return replace(
        result, aggregate_tokens_per_s=result.aggregate_tokens_per_s * g,
        live_requests=result.live_requests * g, live_requests_mean=result.live_requests_mean * g,
        requests=result.requests * g, requests_completed=result.requests_completed * g, tokens=result.tokens * g,
        tokens_per_s_per_mw=times(result.tokens_per_s_per_mw),
        joules_per_token=None if result.joules_per_token is None else result.joules_per_token / g,
        pipeline_bound_tokens_per_s=result.pipeline_bound_tokens_per_s * g,
        concurrency_cap=times(result.concurrency_cap),
        traffic=result.traffic and replace(result.traffic, requests=times(result.traffic.requests),
                                           max_live=times(result.traffic.max_live)))


def rank_traffic(traffic, instance):
    """``traffic`` (a :class:`~placer.simulate.arguments.Traffic`) given in live requests of a group
    (``requests``, ``max_live``) as the heaviest rank's share of them, ``ceil(n / tp)``, under
    attention data parallelism; ``traffic`` itself otherwise."""
    g = instance.requests_factor
    if g == 1:
        return traffic
    share = {key: -(-n // g) for key in ("requests", "max_live") if (n := getattr(traffic, key)) is not None}
    return replace(traffic, **share)
