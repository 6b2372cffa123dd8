"""Prefill in the simulator: what a chunk of a prompt adds to a step of one segment.

A serving runtime with chunked prefill (vLLM V1's token budget ``max_num_batched_tokens``,
SGLang's chunked prefill, TensorRT-LLM's in-flight batching) runs the decodes of a step and the
prompt chunks it admits as one forward pass: the same GEMMs over more rows. On a segment
(:class:`placer.simulate.cost.Segment`) a chunk of ``n`` prompt tokens whose first ``s`` tokens are
already in the KV cache adds to the step's operations (:func:`placer.simulate.cost.roofline_us`
prices the merged step, each GEMM at the compute rate its M = decodes + prompt tokens reaches):

* FLOPs: ``2 x active params x n`` (every token through every weight), ``4 x state elements x n``
  (recurrent-state updates), and attention over the prompt so far: ``f x KV elements per token x
  (sum_min(s + n, w) - sum_min(s, w))`` (each position reads the KV of the positions before it,
  at most a window ``w`` of them; :func:`sum_min`; ``f`` the FLOPs per KV element a query reads,
  :attr:`NodeCost.attention_flops_per_kv`); MLA runs a chunk in the cheaper of its absorbed form
  (``f`` as in decode) and its un-absorbed (MHA) form, ``mha_flops_per_pair`` per (query, key)
  pair plus ``mha_flops_per_cached`` per cached prefix position whose latent it up-projects
  (:func:`placer.simulate.cost._mha_flops`): a fresh prompt runs un-absorbed, a speculative verify
  of a few tokens over a long context absorbed, as the runtimes choose;
* bytes: the weights the step's tokens touch beyond those its decodes read anyway (a dense layer's
  weights are read once per step whatever the tokens; an MoE layer's expected experts grow with the
  tokens, :meth:`NodeCost.weight_bytes_read`), the cached prefix's KV read once and the chunk's KV
  written (``kv_bytes_per_token x (min(s, w) + n)``), the request's state read and written once;
* collectives: a device group's all-reduces and all-to-alls carry the chunk's tokens too.

The step's fixed overheads (per stage and per layer) are paid once, by the decode part
(:meth:`Segment.terms_for`); a step's time is the roofline of the merged work (:func:`step_time_us`).
Everything is in microseconds, bytes and FLOPs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from placer.simulate.cost import Segment, Terms

__all__ = ["Chunk", "sum_min", "chunk_terms", "chunk_time_us", "step_terms", "step_time_us", "prompt_time_us"]


@dataclass(frozen=True)
class Chunk:
    """``tokens`` prompt tokens of one request prefilled in a step, after its first ``start``."""

    start: int
    tokens: int

    def __post_init__(self):
        if self.start < 0 or self.tokens < 1:
            raise ValueError("a chunk starts at a non-negative position and holds at least one token")


def sum_min(p: int, window: int | None) -> float:
    """Sum over positions t = 1..p of min(t, window): KV entries a causal prefill of p tokens reads."""
    if p <= 0:
        return 0.0
    if window is None or window >= p:
        return p * (p + 1) / 2
    return window * (window + 1) / 2 + (p - window) * window


def chunk_terms(seg: Segment, chunks: Sequence[Chunk], decodes: int = 0) -> Terms:
    """Bytes, FLOPs and collective time ``chunks`` add to a step of ``seg`` that also decodes
    ``decodes`` requests (``fixed_us`` is 0: the step's overheads are the decode part's)."""
    n = sum(c.tokens for c in chunks)
    if n == 0:
        return Terms(0.0, 0.0, 0.0, 0.0)
    both, alone = seg.weight_bytes_read(decodes + n), seg.weight_bytes_read(decodes)
    _state, gemm, _s, expert = seg._per_request
    experts = seg._weights(decodes + n)[1] - seg._weights(decodes)[1]
    weights = (both - alone) - experts
    nbytes, flops = weights, gemm * n
    for c in seg.costs:
        flops += 4.0 * c.state_elements * n
        nbytes += 2.0 * c.state_bytes * len(chunks)
        if c.kv_bytes_per_token or c.kv_elements_per_token:
            w = c.kv_window
            for ch in chunks:
                prefix = ch.start if w is None else min(ch.start, w)
                nbytes += c.kv_bytes_per_token * (prefix + ch.tokens)
                pairs = sum_min(ch.start + ch.tokens, w) - sum_min(ch.start, w)
                attention = c.attention_flops_per_kv * c.kv_elements_per_token * pairs
                if c.mha_flops_per_pair:        # MLA: the cheaper of the absorbed and un-absorbed forms
                    attention = min(attention, c.mha_flops_per_pair * pairs + c.mha_flops_per_cached * prefix)
                flops += attention
    comm = sum(col.time_us(decodes + n) - col.time_us(decodes) for col in seg.collectives)
    return Terms(0.0, float(nbytes), flops, comm, experts, weight_bytes=weights, gemm_flops=gemm * n,
                 expert_flops=expert * n, tokens=float(n), expert_tokens=seg.expert_tokens(n))


def merged(seg: Segment, d: Terms, c: Terms) -> Terms:
    """One forward pass doing the work of ``d`` and ``c`` together: the same GEMMs over the
    tokens of both (M adds, the weights are read once)."""
    m = d.tokens + c.tokens
    return Terms(d.fixed_us + c.fixed_us, d.bytes + c.bytes, d.flops + c.flops, d.comm_us + c.comm_us,
                 d.expert_bytes + c.expert_bytes, weight_bytes=d.weight_bytes + c.weight_bytes,
                 gemm_flops=d.gemm_flops + c.gemm_flops, expert_flops=d.expert_flops + c.expert_flops,
                 tokens=m, expert_tokens=seg.expert_tokens(m))


def chunk_time_us(seg: Segment, chunks: Sequence[Chunk], decodes: int = 0, cached: dict | None = None) -> float:
    """Microseconds ``chunks`` add to a step of ``seg`` with ``decodes`` decoding requests (whose
    KV is ``cached``; none by default): the step's time with them less its time without."""
    cached = cached if cached is not None else {w: 0.0 for w in seg.windows()}
    return step_time_us(seg, decodes, cached, chunks) - (seg.duration_us(seg.terms_for(decodes, cached))
                                                         if decodes else 0.0)


def step_terms(seg: Segment, decodes: int, cached: dict, chunks: Sequence[Chunk] = ()) -> Terms:
    """One forward pass of ``seg``: ``decodes`` requests whose KV is ``cached`` (as
    :func:`placer.simulate.cost.cached_tokens` gives) plus the prefill ``chunks``."""
    d = seg.terms_for(decodes, cached)
    if not chunks:
        return d
    return merged(seg, d, chunk_terms(seg, chunks, decodes))


def step_time_us(seg: Segment, decodes: int, cached: dict, chunks: Sequence[Chunk] = ()) -> float:
    """Microseconds of one forward pass of ``seg`` (decodes and prompt chunks in the same GEMMs,
    :meth:`Segment.duration_us` of :func:`step_terms`)."""
    return seg.duration_us(step_terms(seg, decodes, cached, chunks))


def prompt_time_us(segs: Sequence[Segment], prompt: int, budget: int, cached: int = 0) -> float:
    """Time to first token of one ``prompt``-token request alone on the route ``segs``: its
    ``ceil((prompt - cached) / budget)`` chunks run one after the other, each walking every segment
    and hop (the last one's step gives the first token); the first ``cached`` tokens are a
    prefix-cache hit (at most ``prompt - 1``: one token is always computed)."""
    total, start = 0.0, min(cached, prompt - 1)
    while start < prompt:
        n = min(budget, prompt - start)
        ch = (Chunk(start, n),)
        zero = {w: 0.0 for w in set().union(*(s.windows() for s in segs))}
        total += sum(step_time_us(s, 0, zero, ch) + s.hop_time_us(n) for s in segs)
        start += n
    return total
