"""Which per-user speed a report gives, and the figure that multiplies back to the aggregate.

The simulator's ``per_user_tokens_per_s`` is the mean over requests of each request's own decode
rate: ``(tokens - 1) / (time of its last token - time of its first)``. The aggregate is every token
over the whole run, which also counts the pipeline filling and draining, so on a pipeline of
several stages the per-user mean times the live requests exceeds the aggregate by a few percent.
Reports give both, named: ``per_user_tokens_per_s`` (what one user sees while decoding) and
``aggregate_per_live_tokens_per_s`` (aggregate / live requests: the share of the aggregate each
live request gets, which times the live requests is the aggregate exactly).
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["PER_USER_MEANING", "AGGREGATE_PER_LIVE_MEANING", "aggregate_per_live", "with_aggregate_per_live"]

PER_USER_MEANING = ("mean over requests of each request's decode rate, (tokens - 1) / (last token - first "
                    "token)")
AGGREGATE_PER_LIVE_MEANING = "aggregate tokens/s / live requests (times the live requests: the aggregate)"


def aggregate_per_live(row: Mapping, *, live_key: str = "live_per_replica") -> float | None:
    """``aggregate_tokens_per_s / row[live_key]`` (tokens/s), None when either is missing or zero."""
    agg, live = row.get("aggregate_tokens_per_s"), row.get(live_key)
    if agg is None or not live:
        return None
    return float(agg) / int(live)


def with_aggregate_per_live(row: Mapping, *, live_key: str = "live_per_replica") -> dict:
    """``row`` with ``aggregate_per_live_tokens_per_s`` (:func:`aggregate_per_live`) beside its
    ``per_user_tokens_per_s``."""
    return {**row, "aggregate_per_live_tokens_per_s": aggregate_per_live(row, live_key=live_key)}
