"""The oracle and the load of a twin run: :class:`ReferenceModel`, the tiny model of
:mod:`placer.executor.tiny` run unpartitioned one request at a time, and the seeded requests
(:func:`make_requests`) every run and its reference serve."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from placer.executor import tiny_numerics as num
from placer.executor.tiny import TinySpec

__all__ = ["ReferenceModel", "Request", "make_requests", "context_for"]


class ReferenceModel:
    """The unpartitioned tiny model, one request at a time: the oracle for the pipeline.

    Written from the layer definitions, not from the node programs: full output projection,
    full FFN (MoE as shared + sum of the top-k experts), full head.
    """

    def __init__(self, spec: TinySpec):
        self.spec = spec
        self.weights = [num.layer_weights(spec, d) for d in spec.layers]

    def generate(self, prompt: Sequence[int], max_new_tokens: int) -> tuple[list[int], np.ndarray]:
        """Greedy tokens and the logits that chose each of them, shape (max_new_tokens, vocab)."""
        spec = self.spec
        caches = {d.pos: num.alloc_cache(spec, d.mixer) for d in spec.layers if d.mixer}
        tokens: list[int] = []
        logits: list[np.ndarray] = []
        fed = list(prompt)
        pos = 0
        while len(tokens) < max_new_tokens:
            tok = fed[pos] if pos < len(fed) else tokens[-1]
            out = self._step(tok, pos, caches)
            if pos >= len(fed) - 1:
                tokens.append(int(np.argmax(out)))
                logits.append(out)
            pos += 1
        return tokens, np.array(logits)

    def _step(self, token: int, pos: int, caches) -> np.ndarray:
        h = None
        for d, w in zip(self.spec.layers, self.weights):
            if d.kind == "embedding":
                h = w["embed"][token][None, :].copy()
            elif d.kind == "lm_head":
                return (num.rmsnorm(h, w["norm"]) @ w["head"])[0]
            else:
                o = num.mixer_core(d.mixer, w, num.rmsnorm(h, w["norm1"]), [caches[d.pos]], [pos])
                h = h + o @ w["wo"]
                if d.ffn == "dense":
                    h = h + num._swiglu(num.rmsnorm(h, w["norm2"]), w["w1"], w["w3"], w["w2"])
                elif d.ffn == "moe":
                    x2 = num.rmsnorm(h, w["norm2"])
                    idx, wts = num.route_topk(x2 @ w["router"], min(num.TINY_TOP_K, d.num_experts))
                    y = np.zeros_like(h)
                    if d.shared_expert:
                        y += num._swiglu(x2, w["s1"], w["s3"], w["s2"])
                    for j in range(idx.shape[1]):
                        e = idx[0, j]
                        y += wts[0, j] * num._swiglu(x2, w["e1"][e], w["e3"][e], w["e2"][e])
                    h = h + y
        raise ValueError("no lm_head")  # pragma: no cover


# ----------------------------------------------------------------------------- requests
@dataclass(frozen=True)
class Request:
    id: int
    prompt: tuple[int, ...]
    max_new_tokens: int


def make_requests(n: int, tokens: int, *, vocab: int = num.TINY_VOCAB, seed: int = 0,
                  max_prompt: int = 4) -> list[Request]:
    """``n`` seeded requests: prompts of 1..``max_prompt`` tokens, outputs of ``tokens//2..tokens``
    tokens (different lengths, so requests finish at different steps and waiting ones move in)."""
    if n < 1 or tokens < 1:
        raise ValueError("need at least one request and one token")
    rng = np.random.default_rng([seed, 7919])
    out = []
    for i in range(n):
        plen = int(rng.integers(1, max_prompt + 1))
        prompt = tuple(int(t) for t in rng.integers(0, vocab, plen))
        out.append(Request(i, prompt, int(rng.integers(max(1, tokens // 2), tokens + 1))))
    return out


def context_for(requests: Sequence[Request]) -> int:
    """KV slots a request needs: its prompt plus all but its last output token are fed back."""
    return max(len(r.prompt) + r.max_new_tokens - 1 for r in requests)
