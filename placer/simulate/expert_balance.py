"""Expert load balance on an expert-parallel group: the max-loaded rank's tokens, with and without
redundant experts, from a stated routing skew.

**The routing skew (stated, not measured).** Expert ``j`` of a layer's ``E`` receives a share of
the ``k`` expert visits of every token proportional to ``1 / (r_j + 1) ** s``: a Zipf law of
exponent ``s`` (:data:`DEFAULT_SKEW`, 0.5 unless told; 0 is uniform routing) over the experts'
popularity ranks ``r_j``, a fixed pseudo-random permutation of the experts (seeded, so popularity
is uncorrelated with the expert's index and every run gives the same figures). The exponent is
an assumption for illustration (U): published expert loads of DeepSeek-V3 are histograms, not a
fitted law; SGLang reports EPLB's speed-up at 1.49x for prefill and 2.54x for decode on its
96-GPU layout (V, its large-scale EP blog), which a skew of this size reproduces in kind.

**Without redundant experts** the experts sit where the runtime's default puts them: linearly,
consecutive experts a rank, ``E // g`` each and one more on the first ``E mod g`` ranks (vLLM's
``linear`` placement; SGLang's ``trivial`` initial location when ``g`` divides ``E``), so a
rank's load is the sum of its experts' shares.

**With ``N`` redundant experts** the load balancer (DeepSeek's EPLB, which SGLang's
``--enable-eplb`` and vLLM's EPLB run) gives the copies to the hottest experts, one at a time to
the expert whose share per copy is then largest, each copy taking an equal part of its expert's
load, and packs the ``E + N`` physical experts onto the ``g`` ranks, ``(E + N) / g`` a rank, the
heaviest first onto the least-loaded rank with room (its balanced packing). :func:`balance`
returns both maxima; a rank's tokens per step are its load times ``g b k`` for ``b`` tokens of
each rank's own (the mean rank receives ``b k``).
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass

__all__ = ["DEFAULT_SKEW", "Balance", "expert_shares", "linear_loads", "eplb_loads", "balance"]

DEFAULT_SKEW = 0.5


def expert_shares(experts: int, skew: float = DEFAULT_SKEW, seed: int = 0) -> list[float]:
    """Each expert's share of the routed visits (summing to 1), by expert index."""
    if experts < 1:
        raise ValueError("a layer routes to at least one expert")
    if skew < 0:
        raise ValueError(f"routing skew {skew} is negative")
    ranks = list(range(experts))
    random.Random(seed).shuffle(ranks)
    weights = [1.0 / (r + 1) ** skew for r in ranks]
    total = sum(weights)
    return [w / total for w in weights]


def linear_loads(shares: list[float], g: int) -> list[float]:
    """Per rank, its share of the visits with consecutive experts a rank, ``E // g`` each and one
    more on the first ``E mod g`` ranks (vLLM's linear placement)."""
    base, extra = divmod(len(shares), g)
    loads, j = [0.0] * g, 0
    for r in range(g):
        n = base + (1 if r < extra else 0)
        loads[r] = sum(shares[j:j + n])
        j += n
    return loads


def eplb_loads(shares: list[float], g: int, redundant: int) -> list[float]:
    """Per rank, its share with ``redundant`` copies given to the hottest experts and the physical
    experts packed ``(E + N) / g`` a rank (see the module docstring)."""
    e = len(shares)
    if (e + redundant) % g:
        raise ValueError(f"{e} experts and {redundant} copies do not divide over {g} ranks")
    copies = [1] * e
    heap = [(-p, j) for j, p in enumerate(shares)]
    heapq.heapify(heap)
    for _ in range(redundant):
        _, j = heapq.heappop(heap)
        copies[j] += 1
        heapq.heappush(heap, (-shares[j] / copies[j], j))
    physical = sorted((shares[j] / copies[j] for j in range(e) for _ in range(copies[j])), reverse=True)
    room = (e + redundant) // g
    loads, held = [0.0] * g, [0] * g
    for p in physical:
        r = min((r for r in range(g) if held[r] < room), key=lambda r: loads[r])
        loads[r] += p
        held[r] += 1
    return loads


@dataclass(frozen=True)
class Balance:
    """The max-loaded rank of an expert-parallel group of ``g`` ranks: its tokens per step (for
    ``tokens`` of each rank's own, ``k`` experts each) and its load over the mean, without
    redundant experts (linear placement) and with ``redundant`` (EPLB)."""

    g: int
    experts: int
    redundant: int
    skew: float
    tokens: int
    experts_per_token: int
    without: float          # max-loaded rank's load / the mean rank's, linear placement
    with_copies: float | None   # the same with the redundant experts placed by EPLB (None: E + N does not divide)

    def max_tokens(self, factor: float) -> float:
        return factor * self.tokens * self.experts_per_token


def balance(experts: int, g: int, redundant: int, tokens: int, experts_per_token: int,
            skew: float = DEFAULT_SKEW, seed: int = 0) -> Balance:
    """The max-loaded rank's load with and without ``redundant`` experts (see the module docstring)."""
    shares = expert_shares(experts, skew, seed)
    mean = 1.0 / g
    without = max(linear_loads(shares, g)) / mean
    with_copies = max(eplb_loads(shares, g, redundant)) / mean if (experts + redundant) % g == 0 else None
    return Balance(g, experts, redundant, skew, tokens, experts_per_token, without, with_copies)


def worth_reporting(instance) -> bool:
    """Whether ``instance`` spreads experts over a group in a way its plan should describe: with
    redundant experts, over a group spanning nodes, or with experts that do not divide over the ranks."""
    if instance.tp < 2 or not (instance.ep or instance.attention_dp):
        return False
    base = instance.base_model or instance.model
    moe = next((dict(x.ffn_dims) for x in base.layers if x.ffn == "moe" and x.ffn_dims), None)
    if moe is None:
        return False
    physical = moe["num_experts"] + moe.get("redundant_experts", 0)
    fleet = instance.layout.base_fleet if instance.layout is not None and instance.layout.base_fleet else None
    racks = {fleet.by_id[m].rack for m in instance.members(0)} if fleet is not None else set()
    return physical != moe["num_experts"] or physical % instance.tp != 0 or len(racks) > 1


def report_lines(instance, live_requests: int | None, skew: float = DEFAULT_SKEW) -> list[str]:
    """What an expert-parallel plan's MoE layers cost per decode step at ``live_requests`` (the
    group's; None: the instance's concurrency): the experts a rank holds, the dispatch and combine
    all-to-all of each mode (:mod:`placer.problem.all_to_all`) and the max-loaded rank with and
    without redundant experts. Empty for a plan without experts spread over a group."""
    from placer.problem.all_to_all import layer_all_to_all

    if instance.tp < 2 or not (instance.ep or instance.attention_dp):
        return []
    base = instance.base_model or instance.model
    moe = [dict(x.ffn_dims) for x in base.layers if x.ffn == "moe" and x.ffn_dims and x.index is not None]
    if not moe:
        return []
    g, d = instance.tp, moe[0]
    e, copies, k = d["num_experts"], d.get("redundant_experts", 0), d["experts_per_token"]
    live = instance.workload.concurrency * (g if instance.attention_dp else 1) if live_requests is None \
        else live_requests
    tokens = max(1, -(-live // g))
    per = -(-(e + copies) // g)
    spread = f"{e} experts" + (f" + {copies} redundant = {e + copies} physical" if copies else "")
    lines = [f"experts: {spread} over {g} ranks, {per} on the heaviest rank"
             + ("" if (e + copies) % g == 0 else f" (the first {(e + copies) % g} ranks hold one more)")]
    for mode in ("low_latency", "normal"):
        a = layer_all_to_all(instance, 0, tokens, mode)
        if a is not None:
            lines.append(f"all-to-all ({mode.replace('_', '-')}, DeepEP figures) at {tokens} tokens a rank: dispatch "
                         f"{a.dispatch_bytes / 1e3:,.0f} kB in {a.dispatch_us:.1f} us, combine "
                         f"{a.combine_bytes / 1e3:,.0f} kB in {a.combine_us:.1f} us per MoE layer; "
                         f"{len(moe)} layers: {a.us * len(moe) / 1e3:.2f} ms a step")
    b = balance(e, g, copies, tokens, k, skew)
    with_part = (f", {b.with_copies:.2f}x with {copies} redundant (EPLB, {b.max_tokens(b.with_copies):,.0f})"
                 if copies and b.with_copies is not None else "")
    lines.append(f"expert balance at routing skew Zipf {skew} (assumed): the max-loaded rank receives "
                 f"{b.without:.2f}x the mean without redundant experts ({b.max_tokens(b.without):,.0f} token visits "
                 f"of a mean {tokens * k:,}){with_part}")
    return lines
