"""Where speculative decoding stops paying: a placement made for speculation simulated with and
without its drafts at live loads 1, 2, 4, ... up to what its KV reserve holds.

At a small batch a step is bound by reading the weights, so verifying ``k + 1`` positions costs
little more than one and each verify step emits the acceptance length; as the batch grows the
step's per-token terms (FLOPs, KV reads, routed experts touched, collectives' bytes) grow ``k + 1``
times faster with drafts, and the ``k`` draft passes add their own cost, so the gain falls. The
gain at a load is aggregate tokens/s with drafts over aggregate tokens/s without (the same
placement, the same requests, decode only unless asked); it stops paying at the first load whose
gain is below 1. Every figure is a discrete-event run (:func:`placer.simulate.simulate`).
"""

from __future__ import annotations

from dataclasses import dataclass

from placer.algorithms.search import doubling_ladder
from placer.problem.instance import Instance
from placer.simulate.des import simulate_group

__all__ = ["SpecGain", "speculation_gain"]


@dataclass(frozen=True)
class SpecGain:
    """Rows ``{live, with, without, per_user_with, per_user_without, gain}`` and the first load
    whose gain is below 1 (None: it pays at every load tried)."""

    spec_k: int
    spec_accept: float
    rows: list[dict]
    stops_paying_at: int | None

    def to_dict(self) -> dict:
        return dict(spec_k=self.spec_k, spec_accept=self.spec_accept, rows=self.rows,
                    stops_paying_at=self.stops_paying_at)


def speculation_gain(instance: Instance, assignment, *, spec_k: int, spec_accept: float, cap: int,
                     output_tokens: int = 32, decode_only: bool = True, **sim) -> SpecGain:
    """The gain of ``spec_k`` drafts at acceptance ``spec_accept`` on the placement, at live loads
    1, 2, 4, ... up to ``cap`` (the group's live requests under attention data parallelism)."""
    def run(live: int, k: int, accept):
        return simulate_group(instance, assignment, requests=live, max_live=live, output_tokens=output_tokens,
                              decode_only=decode_only, spec_k=k, spec_accept=accept, **sim)

    rows, stop = [], None
    for live in doubling_ladder(max(1, cap)):
        on, off = run(live, spec_k, spec_accept), run(live, 0, None)
        gain = on.aggregate_tokens_per_s / off.aggregate_tokens_per_s if off.aggregate_tokens_per_s else None
        rows.append(dict(live=live, with_tokens_per_s=on.aggregate_tokens_per_s,
                         without_tokens_per_s=off.aggregate_tokens_per_s,
                         per_user_with=on.per_user_tokens_per_s, per_user_without=off.per_user_tokens_per_s,
                         gain=gain))
        if stop is None and gain is not None and gain < 1:
            stop = live
    return SpecGain(spec_k, spec_accept, rows, stop)
