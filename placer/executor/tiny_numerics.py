"""The tiny twin's dimensions, seeded weights and numerics: each mixer's core in numpy, its per-request caches at the
spec's precisions, and the small functions they share (norms, RoPE, softmax, top-k routing).

Written once and used by both the piece programs (:func:`placer.executor.tiny.node_program`) and
the unpartitioned oracle (:class:`placer.executor.tiny.ReferenceModel`).
"""

from __future__ import annotations

import math
import zlib
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from placer.executor.tiny import LayerDesc, TinySpec

TINY_HIDDEN = 32
TINY_VOCAB = 97
TINY_WINDOW = 6          # sliding-window layers keep this many tokens (runs are longer, so it binds)
TINY_TOP_K = 2
TINY_MIN_EXPERTS = 8
ROPE_BASE = 10000.0

# Mixer dimensions in the spec language of placer.specs.layers, so that mixer_counts() gives the exact
# KV / state elements of these very arrays.
TINY_MIXERS: dict[str, dict] = {
    "gqa": {"type": "gqa", "num_heads": 4, "num_kv_heads": 2, "head_dim": 8},
    "mha": {"type": "mha", "num_heads": 4, "num_kv_heads": 4, "head_dim": 8},
    "sliding": {"type": "sliding", "num_heads": 4, "num_kv_heads": 2, "head_dim": 8,
                "sliding_window": TINY_WINDOW},
    "mla": {"type": "mla", "num_heads": 4, "q_lora_rank": 16, "kv_lora_rank": 16, "qk_nope_head_dim": 8,
            "qk_rope_head_dim": 4, "v_head_dim": 8},
    "kda": {"type": "kda", "num_heads": 2, "head_dim": 8, "conv_kernel": 4},
    "gated_deltanet": {"type": "gated_deltanet", "num_k_heads": 2, "num_v_heads": 4, "head_k_dim": 8,
                       "head_v_dim": 8, "conv_kernel": 4},
    "lightning": {"type": "lightning", "num_heads": 2, "head_dim": 8},
    "mamba": {"type": "mamba", "d_inner": 64, "d_state": 4, "d_conv": 4, "dt_rank": 2},
    "mamba2": {"type": "mamba2", "d_inner": 64, "d_state": 4, "d_conv": 4, "num_heads": 4, "n_groups": 1},
}
TINY_FFNS = {"dense": {"intermediate_size": 64}, "moe": {"moe_intermediate_size": 16, "shared": 16}}

DTYPE_BITS = {16: np.float16, 32: np.float32, 64: np.float64}




# ----------------------------------------------------------------------------- numerics
def rmsnorm(x: np.ndarray, w: np.ndarray | None = None, eps: float = 1e-6) -> np.ndarray:
    y = x / np.sqrt((x * x).sum(-1, keepdims=True) / x.shape[-1] + eps)
    return y if w is None else y * w


def silu(x):
    return x / (1.0 + np.exp(-x))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def softplus(x):
    return np.logaddexp(0.0, x)


def l2norm(x, eps=1e-6):
    return x / np.sqrt((x * x).sum(-1, keepdims=True) + eps)


def rope(x: np.ndarray, pos: int) -> np.ndarray:
    """Rotary embedding of the last axis (even length) at position ``pos`` (half-split pairs)."""
    d = x.shape[-1]
    half = d // 2
    inv = ROPE_BASE ** (-np.arange(half) / half)
    ang = pos * inv
    c, s = np.cos(ang), np.sin(ang)
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([a * c - b * s, a * s + b * c], axis=-1)


def softmax(x, axis=-1):
    z = x - np.max(x, axis=axis, keepdims=True)
    e = np.exp(z)
    return e / np.sum(e, axis=axis, keepdims=True)


def alloc_cache(spec: TinySpec, mixer: str) -> dict[str, np.ndarray]:
    """Zeroed per-request KV cache or state of one tiny mixer, at the spec's precisions."""
    m = TINY_MIXERS[mixer]
    t = m["type"]
    kv, st, cv = DTYPE_BITS[spec.kv_bits], DTYPE_BITS[spec.state_bits], DTYPE_BITS[spec.conv_state_bits]
    ctx = spec.context_tokens
    if t in ("gqa", "mha", "sliding"):
        slots = min(ctx, m["sliding_window"]) if t == "sliding" else ctx
        shape = (slots, m["num_kv_heads"], m["head_dim"])
        return {"k": np.zeros(shape, kv), "v": np.zeros(shape, kv)}
    if t == "mla":
        return {"c": np.zeros((ctx, m["kv_lora_rank"]), kv), "kr": np.zeros((ctx, m["qk_rope_head_dim"]), kv)}
    if t == "kda":
        n, d, k = m["num_heads"], m["head_dim"], m["conv_kernel"]
        return {"S": np.zeros((n, d, d), st), "conv_q": np.zeros((k - 1, n * d), cv),
                "conv_k": np.zeros((k - 1, n * d), cv), "conv_v": np.zeros((k - 1, n * d), cv)}
    if t == "gated_deltanet":
        nk, nv, dk, dv, k = m["num_k_heads"], m["num_v_heads"], m["head_k_dim"], m["head_v_dim"], m["conv_kernel"]
        return {"S": np.zeros((nv, dk, dv), st), "conv": np.zeros((k - 1, 2 * nk * dk + nv * dv), cv)}
    if t == "lightning":
        n, d = m["num_heads"], m["head_dim"]
        return {"S": np.zeros((n, d, d), st)}
    if t == "mamba":
        return {"h": np.zeros((m["d_inner"], m["d_state"]), st),
                "conv": np.zeros((m["d_conv"] - 1, m["d_inner"]), cv)}
    if t == "mamba2":
        di, ds, nh = m["d_inner"], m["d_state"], m["num_heads"]
        conv_dim = di + 2 * m["n_groups"] * ds
        return {"h": np.zeros((nh, di // nh, ds), st), "conv": np.zeros((m["d_conv"] - 1, conv_dim), cv)}
    raise ValueError(t)  # pragma: no cover


def _short_conv(x: np.ndarray, caches: list[dict], key: str, weight: np.ndarray,
                bias: np.ndarray | None = None) -> np.ndarray:
    """Causal depthwise conv over the last ``kernel`` inputs; updates each request's conv state."""
    kernel = weight.shape[0]
    window = np.empty((len(caches), kernel, x.shape[1]))                    # (B, k, D)
    for b, c in enumerate(caches):
        window[b, :-1] = c[key]
    window[:, -1] = x
    out = np.einsum("bkd,kd->bd", window, weight)
    if bias is not None:
        out = out + bias
    for b, c in enumerate(caches):
        c[key][...] = window[b, 1:]
    return out


def _attention_core(m, w, x, caches, positions):
    t = m["type"]
    nq, nkv, d = m["num_heads"], m["num_kv_heads"], m["head_dim"]
    q = (x @ w["wq"]).reshape(-1, nq, d)
    k = (x @ w["wk"]).reshape(-1, nkv, d)
    v = (x @ w["wv"]).reshape(-1, nkv, d)
    out = np.empty((x.shape[0], nq * d))
    rep = nq // nkv
    for b, (c, pos) in enumerate(zip(caches, positions)):
        pos = int(pos)
        slots = c["k"].shape[0]
        if t != "sliding" and pos >= slots:
            raise IndexError(f"position {pos} beyond the {slots}-token KV reserve")
        slot = pos % slots
        c["k"][slot] = rope(k[b], pos)
        c["v"][slot] = v[b]
        n = min(pos + 1, slots)
        kk = c["k"][:n].astype(np.float64)                                 # (n, nkv, d)
        vv = c["v"][:n].astype(np.float64)
        qb = rope(q[b], pos).reshape(nkv, rep, d)
        scores = np.einsum("grd,ngd->grn", qb, kk) / math.sqrt(d)
        p = softmax(scores, axis=-1)
        out[b] = np.einsum("grn,ngd->grd", p, vv).reshape(-1)
    return out


def _mla_core(m, w, x, caches, positions):
    n, kvr = m["num_heads"], m["kv_lora_rank"]
    dn, dr, dv = m["qk_nope_head_dim"], m["qk_rope_head_dim"], m["v_head_dim"]
    q = (rmsnorm(x @ w["wq_a"]) @ w["wq_b"]).reshape(-1, n, dn + dr)
    kv = x @ w["wkv_a"]
    out = np.empty((x.shape[0], n * dv))
    for b, (c, pos) in enumerate(zip(caches, positions)):
        pos = int(pos)
        if pos >= c["c"].shape[0]:
            raise IndexError(f"position {pos} beyond the {c['c'].shape[0]}-token KV reserve")
        c["c"][pos] = rmsnorm(kv[b, :kvr])
        c["kr"][pos] = rope(kv[b, kvr:], pos)
        lat = c["c"][:pos + 1].astype(np.float64)
        kr = c["kr"][:pos + 1].astype(np.float64)
        kvb = (lat @ w["wkv_b"]).reshape(-1, n, dn + dv)
        k_nope, vals = kvb[..., :dn], kvb[..., dn:]
        q_nope, q_rope = q[b, :, :dn], rope(q[b, :, dn:], pos)
        scores = (np.einsum("hd,thd->ht", q_nope, k_nope) + q_rope @ kr.T) / math.sqrt(dn + dr)
        p = softmax(scores, axis=-1)
        out[b] = np.einsum("ht,thd->hd", p, vals).reshape(-1)
    return out


def _delta_rule(S, k, v, q, g, beta, decay_rows: bool):
    """Gated delta rule on stacked states ``S`` (B, heads, dk, dv); returns (S', o)."""
    S = S * (g[..., :, None] if decay_rows else g[..., None, None])
    pred = np.einsum("bhkv,bhk->bhv", S, k)
    S = S + beta[..., None, None] * k[..., :, None] * (v - pred)[..., None, :]
    o = np.einsum("bhkv,bhk->bhv", S, q) / math.sqrt(k.shape[-1])
    return S, o


def _kda_core(m, w, x, caches, positions):
    n, d = m["num_heads"], m["head_dim"]
    B = x.shape[0]
    q = silu(_short_conv(x @ w["wq"], caches, "conv_q", w["conv_q"]))
    k = silu(_short_conv(x @ w["wk"], caches, "conv_k", w["conv_k"]))
    v = silu(_short_conv(x @ w["wv"], caches, "conv_v", w["conv_v"]))
    q, k, v = (a.reshape(B, n, d) for a in (q, k, v))
    q, k = l2norm(q), l2norm(k)
    f = (x @ w["wf_a"]) @ w["wf_b"] + w["dt_bias"]
    g = np.exp(-np.exp(w["A_log"])[None, :, None] * softplus(f).reshape(B, n, d))
    beta = sigmoid(x @ w["wbeta"])
    S = np.stack([c["S"] for c in caches]).astype(np.float64)
    S, o = _delta_rule(S, k, v, q, g, beta, decay_rows=True)
    for b, c in enumerate(caches):
        c["S"][...] = S[b]
    gate = sigmoid((x @ w["wg_a"]) @ w["wg_b"]).reshape(B, n, d)
    return (rmsnorm(o, w["onorm"]) * gate).reshape(B, n * d)


def _gdn_core(m, w, x, caches, positions):
    nk, nv, dk, dv = m["num_k_heads"], m["num_v_heads"], m["head_k_dim"], m["head_v_dim"]
    B = x.shape[0]
    qkvz = x @ w["wqkvz"]
    conv_dim = 2 * nk * dk + nv * dv
    mixed = silu(_short_conv(qkvz[:, :conv_dim], caches, "conv", w["conv"]))
    z = qkvz[:, conv_dim:].reshape(B, nv, dv)
    q = l2norm(mixed[:, :nk * dk].reshape(B, nk, dk))
    k = l2norm(mixed[:, nk * dk:2 * nk * dk].reshape(B, nk, dk))
    v = mixed[:, 2 * nk * dk:].reshape(B, nv, dv)
    rep = nv // nk
    q, k = np.repeat(q, rep, axis=1), np.repeat(k, rep, axis=1)
    ba = x @ w["wba"]
    beta = sigmoid(ba[:, :nv])
    g = np.exp(-np.exp(w["A_log"]) * softplus(ba[:, nv:] + w["dt_bias"]))
    S = np.stack([c["S"] for c in caches]).astype(np.float64)
    S, o = _delta_rule(S, k, v, q, g, beta, decay_rows=False)
    for b, c in enumerate(caches):
        c["S"][...] = S[b]
    return (rmsnorm(o, w["onorm"]) * silu(z)).reshape(B, nv * dv)


# per-head decay of lightning attention: ALiBi-like slopes 2^(-8 (h+1) / heads)
_LIGHTNING_DECAY = {n: np.exp(-(2.0 ** (-8.0 * (np.arange(n) + 1) / n))) for n in (1, 2, 4, 8, 16)}


def _lightning_core(m, w, x, caches, positions):
    n, d = m["num_heads"], m["head_dim"]
    B = x.shape[0]
    qkv = silu(x @ w["wqkv"]).reshape(B, 3, n, d)
    q, k, v = qkv[:, 0], qkv[:, 1], qkv[:, 2]
    decay = _LIGHTNING_DECAY[n]
    S = np.stack([c["S"] for c in caches]).astype(np.float64)
    S = decay[None, :, None, None] * S + k[..., :, None] * v[..., None, :]
    o = np.einsum("bhkv,bhk->bhv", S, q) / math.sqrt(d)
    for b, c in enumerate(caches):
        c["S"][...] = S[b]
    return rmsnorm(o.reshape(B, n * d), w["onorm"]) * sigmoid(x @ w["wgate"])


def _mamba_core(m, w, x, caches, positions):
    di, ds, dtr = m["d_inner"], m["d_state"], m["dt_rank"]
    xz = x @ w["win"]
    xi, z = xz[:, :di], xz[:, di:]
    xc = silu(_short_conv(xi, caches, "conv", w["conv"], w["conv_b"]))
    dbl = xc @ w["wx"]
    dt = softplus(dbl[:, :dtr] @ w["wdt"] + w["dt_b"])                      # (B, di)
    Bm, Cm = dbl[:, dtr:dtr + ds], dbl[:, dtr + ds:]
    h = np.stack([c["h"] for c in caches]).astype(np.float64)              # (B, di, ds)
    dA = np.exp(dt[:, :, None] * -np.exp(w["A_log"])[None])
    h = dA * h + (dt * xc)[:, :, None] * Bm[:, None, :]
    for b, c in enumerate(caches):
        c["h"][...] = h[b]
    y = np.einsum("bds,bs->bd", h, Cm) + w["D"] * xc
    return y * silu(z)


def _mamba2_core(m, w, x, caches, positions):
    di, ds, nh, ng = m["d_inner"], m["d_state"], m["num_heads"], m["n_groups"]
    B = x.shape[0]
    hd = di // nh
    proj = x @ w["win"]
    z = proj[:, :di]
    conv_dim = di + 2 * ng * ds
    xbc = silu(_short_conv(proj[:, di:di + conv_dim], caches, "conv", w["conv"], w["conv_b"]))
    dt = softplus(proj[:, di + conv_dim:] + w["dt_bias"])                  # (B, nh)
    xs = xbc[:, :di].reshape(B, nh, hd)
    Bm, Cm = xbc[:, di:di + ds], xbc[:, di + ds:di + 2 * ds]               # one group
    h = np.stack([c["h"] for c in caches]).astype(np.float64)              # (B, nh, hd, ds)
    dA = np.exp(dt * -np.exp(w["A_log"]))
    h = dA[:, :, None, None] * h + (dt[:, :, None] * xs)[..., None] * Bm[:, None, None, :]
    for b, c in enumerate(caches):
        c["h"][...] = h[b]
    y = np.einsum("bhps,bs->bhp", h, Cm) + w["D"][None, :, None] * xs
    return rmsnorm(y.reshape(B, di) * silu(z), w["onorm"])


_CORES = {"gqa": _attention_core, "mha": _attention_core, "sliding": _attention_core, "mla": _mla_core,
          "kda": _kda_core, "gated_deltanet": _gdn_core, "lightning": _lightning_core,
          "mamba": _mamba_core, "mamba2": _mamba2_core}


def mixer_core(mixer: str, w: dict, x: np.ndarray, caches: list[dict], positions) -> np.ndarray:
    """One decode step of a mixer for a batch: ``x`` (B, hidden) normed input, one cache per row;
    returns the mixer output before its output projection, (B, width). Updates the caches."""
    m = TINY_MIXERS[mixer]
    return _CORES[m["type"]](m, w, x, caches, positions)


def _swiglu(x, w1, w3, w2):
    return (silu(x @ w1) * (x @ w3)) @ w2


def route_topk(router_logits: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-k experts per row (stable order) and their renormalised softmax weights."""
    p = softmax(router_logits, axis=-1)
    idx = np.argsort(-p, axis=-1, kind="stable")[:, :k]
    wts = p[np.arange(p.shape[0])[:, None], idx]
    return idx, wts / wts.sum(axis=-1, keepdims=True)


def _split(n: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` contiguous ranges over ``range(n)`` (placer.problem.reductions.refine's split rule: larger first)."""
    base, extra = divmod(n, parts)
    out, lo = [], 0
    for i in range(parts):
        hi = lo + base + (1 if i < extra else 0)
        out.append((lo, hi))
        lo = hi
    return out


# ----------------------------------------------------------------------------- weights
def _rng(spec: TinySpec, desc: LayerDesc) -> np.random.Generator:
    return np.random.default_rng([spec.seed, desc.pos, zlib.crc32(desc.name.encode())])


def _mat(rng, rows, cols, scale=1.0):
    return rng.standard_normal((rows, cols)) * (scale / math.sqrt(rows))


def _norm_w(rng, n):
    return 1.0 + 0.1 * rng.standard_normal(n)


def _mixer_width(mixer: str) -> int:
    m = TINY_MIXERS[mixer]
    t = m["type"]
    if t in ("gqa", "mha", "sliding"):
        return m["num_heads"] * m["head_dim"]
    if t == "mla":
        return m["num_heads"] * m["v_head_dim"]
    if t in ("kda", "lightning"):
        return m["num_heads"] * m["head_dim"]
    if t == "gated_deltanet":
        return m["num_v_heads"] * m["head_v_dim"]
    return m["d_inner"]


def layer_weights(spec: TinySpec, desc: LayerDesc) -> dict[str, np.ndarray]:
    """All weights of one tiny base layer, deterministic in (seed, layer position, name)."""
    rng = _rng(spec, desc)
    H, V = spec.hidden, spec.vocab
    w: dict[str, np.ndarray] = {}
    if desc.kind == "embedding":
        w["embed"] = rng.standard_normal((V, H))
        return w
    if desc.kind == "lm_head":
        w["norm"] = _norm_w(rng, H)
        w["head"] = _mat(rng, H, V, 2.0)
        return w
    w["norm1"] = _norm_w(rng, H)
    m = TINY_MIXERS[desc.mixer]
    t = m["type"]
    if t in ("gqa", "mha", "sliding"):
        nq, nkv, d = m["num_heads"], m["num_kv_heads"], m["head_dim"]
        w["wq"], w["wk"], w["wv"] = _mat(rng, H, nq * d), _mat(rng, H, nkv * d), _mat(rng, H, nkv * d)
    elif t == "mla":
        n, qr, kvr = m["num_heads"], m["q_lora_rank"], m["kv_lora_rank"]
        dn, dr, dv = m["qk_nope_head_dim"], m["qk_rope_head_dim"], m["v_head_dim"]
        w["wq_a"], w["wq_b"] = _mat(rng, H, qr), _mat(rng, qr, n * (dn + dr))
        w["wkv_a"], w["wkv_b"] = _mat(rng, H, kvr + dr), _mat(rng, kvr, n * (dn + dv))
    elif t == "kda":
        n, d, k = m["num_heads"], m["head_dim"], m["conv_kernel"]
        p = n * d
        w["wq"], w["wk"], w["wv"] = _mat(rng, H, p), _mat(rng, H, p), _mat(rng, H, p)
        w["conv_q"], w["conv_k"], w["conv_v"] = (rng.standard_normal((k, p)) * 0.5 for _ in range(3))
        w["wf_a"], w["wf_b"] = _mat(rng, H, d), _mat(rng, d, p)
        w["wg_a"], w["wg_b"] = _mat(rng, H, d), _mat(rng, d, p)
        w["wbeta"] = _mat(rng, H, n)
        w["A_log"] = rng.uniform(-1.0, 0.5, n)
        w["dt_bias"] = 0.1 * rng.standard_normal(p)
        w["onorm"] = _norm_w(rng, d)
    elif t == "gated_deltanet":
        nk, nv, dk, dv, k = m["num_k_heads"], m["num_v_heads"], m["head_k_dim"], m["head_v_dim"], m["conv_kernel"]
        conv_dim = 2 * nk * dk + nv * dv
        w["wqkvz"] = _mat(rng, H, 2 * nk * dk + 2 * nv * dv)
        w["wba"] = _mat(rng, H, 2 * nv)
        w["conv"] = rng.standard_normal((k, conv_dim)) * 0.5
        w["A_log"] = rng.uniform(-1.0, 0.5, nv)
        w["dt_bias"] = 0.1 * rng.standard_normal(nv)
        w["onorm"] = _norm_w(rng, dv)
    elif t == "lightning":
        n, d = m["num_heads"], m["head_dim"]
        w["wqkv"], w["wgate"] = _mat(rng, H, 3 * n * d), _mat(rng, H, n * d)
        w["onorm"] = _norm_w(rng, n * d)
    elif t == "mamba":
        di, ds, dc, dtr = m["d_inner"], m["d_state"], m["d_conv"], m["dt_rank"]
        w["win"] = _mat(rng, H, 2 * di)
        w["conv"], w["conv_b"] = rng.standard_normal((dc, di)) * 0.5, 0.1 * rng.standard_normal(di)
        w["wx"] = _mat(rng, di, dtr + 2 * ds)
        w["wdt"], w["dt_b"] = _mat(rng, dtr, di), rng.uniform(-3.0, -1.0, di)
        w["A_log"] = np.log(rng.uniform(1.0, 8.0, (di, ds)))
        w["D"] = rng.standard_normal(di) * 0.5
    elif t == "mamba2":
        di, ds, dc, nh, ng = m["d_inner"], m["d_state"], m["d_conv"], m["num_heads"], m["n_groups"]
        conv_dim = di + 2 * ng * ds
        w["win"] = _mat(rng, H, 2 * di + 2 * ng * ds + nh)
        w["conv"], w["conv_b"] = rng.standard_normal((dc, conv_dim)) * 0.5, 0.1 * rng.standard_normal(conv_dim)
        w["dt_bias"] = rng.uniform(-3.0, -1.0, nh)
        w["A_log"] = np.log(rng.uniform(1.0, 8.0, nh))
        w["D"] = rng.standard_normal(nh) * 0.5
        w["onorm"] = _norm_w(rng, di)
    else:  # pragma: no cover - TINY_MIXERS lists every type
        raise ValueError(t)
    w["wo"] = _mat(rng, _mixer_width(desc.mixer), H)
    if desc.ffn == "dense":
        inter = TINY_FFNS["dense"]["intermediate_size"]
        w["norm2"] = _norm_w(rng, H)
        w["w1"], w["w3"], w["w2"] = _mat(rng, H, inter), _mat(rng, H, inter), _mat(rng, inter, H)
    elif desc.ffn == "moe":
        e, inter = desc.num_experts, TINY_FFNS["moe"]["moe_intermediate_size"]
        w["norm2"] = _norm_w(rng, H)
        w["router"] = _mat(rng, H, e, 3.0)
        w["e1"] = np.stack([_mat(rng, H, inter) for _ in range(e)])
        w["e3"] = np.stack([_mat(rng, H, inter) for _ in range(e)])
        w["e2"] = np.stack([_mat(rng, inter, H) for _ in range(e)])
        if desc.shared_expert:
            s = TINY_FFNS["moe"]["shared"]
            w["s1"], w["s3"], w["s2"] = _mat(rng, H, s), _mat(rng, H, s), _mat(rng, s, H)
    return w


