"""Exact per-layer counts from architecture dimensions.

Each mixer and FFN kind lists its tensors (name, shape, whether it is a linear weight that a
quantized checkpoint may store packed); its parameter count is the sum of their elements. It also
knows its KV-cache elements per token and its recurrent-state elements per request. Formulas
follow the reference implementations (transformers / vLLM / vendor code); tensor names follow the
checkpoints' own naming (DeepSeek / Llama style), so quantization rules can be matched to them:

* GQA/MHA: ``h*(n_q*d) + 2*h*(n_kv*d) + (n_q*d)*h`` (+ biases, q/k norms, output gate, sinks);
  KV per token ``2*n_kv*d``; a sliding window (or an attention chunk) bounds the cached tokens.
* MLA: ``h*q_lora + q_lora*n*(d_nope+d_rope) + h*(kv_lora+d_rope) + kv_lora*n*(d_nope+d_v) + n*d_v*h``
  (+ norms, an optional output gate); KV per token ``kv_lora + d_rope``, plus the DSA indexer's own
  key (``index_head_dim`` per token) when the layer has one.
* KDA: q/k/v projections, decay and gate low-rank (or full-rank) projections, beta, three short
  convs; state ``heads*d*d`` (recurrent) and ``(kernel-1)*(q+k+v dims)`` (conv).
* Gated DeltaNet: fused qkvz and ba projections, one conv over q,k,v; state ``nv*dv*dk`` and
  ``(kernel-1)*(2*nk*dk + nv*dv)``.
* Lightning attention: qkv, output gate, out projection; state ``heads*d*d``.
* Mamba-1: state ``d_inner*d_state`` and conv ``d_inner*(d_conv-1)``; Mamba-2 per its paper.
* SwiGLU FFN ``3*h*I`` (``2*h*I`` without a gate); MoE ``E*3*h*I + shared + router`` (a latent
  MoE runs its experts on a narrower width behind a down and an up projection).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

__all__ = ["Tensor", "MixerCounts", "FfnCounts", "mixer_counts", "ffn_counts", "mixer_tensors",
           "ffn_tensors", "ATTENTION_MIXERS", "LINEAR_MIXERS"]

ATTENTION_MIXERS = ("mha", "gqa", "mla", "sliding")
LINEAR_MIXERS = ("kda", "gated_deltanet", "lightning", "mamba", "mamba2")


@dataclass(frozen=True)
class Tensor:
    """One stored tensor of a layer. ``shape`` of a linear weight is ``(out, in)``, with a leading
    expert count for routed experts (``(E, out, in)``, stored as ``E`` tensors named ``...experts.<e>...``).
    ``role`` groups tensors for reporting and splitting: mixer, dense, experts, shared, router, norm."""

    name: str
    shape: tuple[int, ...]
    linear: bool = False
    role: str = "mixer"

    @property
    def numel(self) -> int:
        return prod(self.shape)


@dataclass(frozen=True)
class MixerCounts:
    params: int
    kv_elements_per_token: int = 0
    kv_window: int | None = None
    state_elements: int = 0          # recurrent state, stored at the workload's state precision
    conv_state_elements: int = 0     # short-conv state, stored at the conv-state precision


@dataclass(frozen=True)
class FfnCounts:
    params: int
    active_params: int
    num_experts: int = 0
    expert_params: int = 0           # one routed expert
    shared_params: int = 0           # shared experts + router (+ gate), always resident with the FFN


def _lin(name: str, out: int, inp: int, role: str = "mixer", bias: bool = False) -> list[Tensor]:
    ts = [Tensor(f"{name}.weight", (out, inp), linear=True, role=role)]
    if bias:
        ts.append(Tensor(f"{name}.bias", (out,), role=role))
    return ts


def _vec(name: str, n: int, role: str = "mixer") -> list[Tensor]:
    return [Tensor(name, (n,), role=role)] if n else []


def mixer_tensors(spec: dict, hidden: int) -> list[Tensor]:
    """The tensors of one token mixer ``spec`` (a validated dict with a ``type``) at hidden size ``hidden``."""
    t = spec["type"]
    h = hidden
    a = "self_attn"
    if t in ("mha", "gqa", "sliding"):
        nq = spec["num_heads"]
        nkv = spec.get("num_kv_heads") or nq
        d = spec.get("head_dim") or h // nq
        bias = bool(spec.get("qkv_bias"))
        q_out = nq * d * (2 if spec.get("gated") else 1)
        ts = _lin(f"{a}.q_proj", q_out, h, bias=bias) + _lin(f"{a}.k_proj", nkv * d, h, bias=bias) \
            + _lin(f"{a}.v_proj", nkv * d, h, bias=bias) + _lin(f"{a}.o_proj", h, nq * d, bias=bool(spec.get("o_bias")))
        if spec.get("qkv_bias") and spec.get("gated"):
            # the gate half of a gated q_proj carries no bias in the checkpoints that have both
            ts[1] = Tensor(f"{a}.q_proj.bias", (nq * d,))
        if spec.get("output_gate"):
            ts += _lin(f"{a}.g_proj", nq * d, h)
        if spec.get("qk_norm") == "full":
            ts += _vec(f"{a}.q_norm.weight", nq * d) + _vec(f"{a}.k_norm.weight", nkv * d)
        elif spec.get("qk_norm"):
            ts += _vec(f"{a}.q_norm.weight", d) + _vec(f"{a}.k_norm.weight", d)
        if spec.get("sinks"):
            ts += _vec(f"{a}.sinks", nq)
        return ts
    if t == "mla":
        n = spec["num_heads"]
        qlr = spec.get("q_lora_rank")
        kvr = spec["kv_lora_rank"]
        dn, dr, dv = spec["qk_nope_head_dim"], spec["qk_rope_head_dim"], spec["v_head_dim"]
        if qlr:
            ts = _lin(f"{a}.q_a_proj", qlr, h) + _vec(f"{a}.q_a_layernorm.weight", qlr) \
                + _lin(f"{a}.q_b_proj", n * (dn + dr), qlr)
        else:
            ts = _lin(f"{a}.q_proj", n * (dn + dr), h)
        ts += _lin(f"{a}.kv_a_proj_with_mqa", kvr + dr, h) + _vec(f"{a}.kv_a_layernorm.weight", kvr) \
            + _lin(f"{a}.kv_b_proj", n * (dn + dv), kvr) + _lin(f"{a}.o_proj", h, n * dv)
        if spec.get("output_gate"):
            ts += _lin(f"{a}.g_proj", n * dv, h)
        ih = spec.get("index_head_dim")
        if ih:
            ts += _lin(f"{a}.indexer.wq_b", spec["index_num_heads"] * ih, qlr or h) \
                + _lin(f"{a}.indexer.wk", ih, h) + _vec(f"{a}.indexer.k_norm.weight", ih) \
                + _vec(f"{a}.indexer.k_norm.bias", ih) + _lin(f"{a}.indexer.weights_proj", spec["index_num_heads"], h)
        return ts
    la = "self_attn"
    if t == "kda":
        n = spec["num_heads"]
        d = spec["head_dim"]
        k = spec.get("conv_kernel", 4)
        proj = n * d
        ts = _lin(f"{la}.q_proj", proj, h) + _lin(f"{la}.k_proj", proj, h) + _lin(f"{la}.v_proj", proj, h)
        ts += [Tensor(f"{la}.{x}_conv1d.weight", (proj, 1, k)) for x in "qkv"]
        ts += _lin(f"{la}.f_a_proj", d, h) + _lin(f"{la}.f_b_proj", proj, d)       # decay, low rank
        if spec.get("full_rank_gate"):
            ts += _lin(f"{la}.g_proj", proj, h)
        else:
            ts += _lin(f"{la}.g_a_proj", d, h) + _lin(f"{la}.g_b_proj", proj, d)    # output gate, low rank
        ts += _lin(f"{la}.b_proj", n, h) + _vec(f"{la}.A_log", n) + _vec(f"{la}.dt_bias", proj)
        ts += _vec(f"{la}.o_norm.weight", d) + _lin(f"{la}.o_proj", h, proj)
        return ts
    la = "linear_attn"
    if t == "gated_deltanet":
        nk, nv = spec["num_k_heads"], spec["num_v_heads"]
        dk, dv = spec["head_k_dim"], spec["head_v_dim"]
        k = spec.get("conv_kernel", 4)
        key_dim, value_dim = nk * dk, nv * dv
        conv_dim = 2 * key_dim + value_dim
        return (_lin(f"{la}.in_proj_qkvz", 2 * key_dim + 2 * value_dim, h) + _lin(f"{la}.in_proj_ba", 2 * nv, h)
                + [Tensor(f"{la}.conv1d.weight", (conv_dim, 1, k))] + _vec(f"{la}.dt_bias", nv)
                + _vec(f"{la}.A_log", nv) + _vec(f"{la}.norm.weight", dv) + _lin(f"{la}.out_proj", h, value_dim))
    if t == "lightning":
        n, d = spec["num_heads"], spec["head_dim"]
        inner = n * d
        return (_lin(f"{a}.qkv_proj", 3 * inner, h) + _lin(f"{a}.output_gate", inner, h)
                + _lin(f"{a}.out_proj", h, inner) + _vec(f"{a}.norm.weight", inner))
    m = "mamba"
    if t == "mamba":
        di = spec.get("d_inner") or spec.get("expand", 2) * h
        ds, dc = spec["d_state"], spec.get("d_conv", 4)
        dtr = spec.get("dt_rank") or -(-h // 16)
        return (_lin(f"{m}.in_proj", 2 * di, h) + [Tensor(f"{m}.conv1d.weight", (di, 1, dc))]
                + _vec(f"{m}.conv1d.bias", di) + _lin(f"{m}.x_proj", dtr + 2 * ds, di)
                + _lin(f"{m}.dt_proj", di, dtr, bias=True) + [Tensor(f"{m}.A_log", (di, ds))]
                + _vec(f"{m}.D", di) + _lin(f"{m}.out_proj", h, di))
    if t == "mamba2":
        di = spec.get("d_inner") or spec.get("expand", 2) * h
        ds, dc = spec["d_state"], spec.get("d_conv", 4)
        ng, nh = spec.get("n_groups", 1), spec["num_heads"]
        conv_dim = di + 2 * ng * ds
        bias = bool(spec.get("proj_bias"))
        return (_lin(f"{m}.in_proj", 2 * di + 2 * ng * ds + nh, h, bias=bias)
                + [Tensor(f"{m}.conv1d.weight", (conv_dim, 1, dc))]
                + _vec(f"{m}.conv1d.bias", conv_dim if spec.get("conv_bias", True) else 0)
                + _vec(f"{m}.dt_bias", nh) + _vec(f"{m}.A_log", nh) + _vec(f"{m}.D", nh)
                + _vec(f"{m}.norm.weight", di) + _lin(f"{m}.out_proj", h, di, bias=bias))
    raise ValueError(f"unknown mixer type {t!r}")


def mixer_counts(spec: dict, hidden: int) -> MixerCounts:
    """Counts for one token mixer ``spec`` (a validated dict with a ``type``) at hidden size ``hidden``."""
    t = spec["type"]
    h = hidden
    p = sum(x.numel for x in mixer_tensors(spec, hidden))
    if t in ("mha", "gqa", "sliding"):
        nq = spec["num_heads"]
        nkv = spec.get("num_kv_heads") or nq
        d = spec.get("head_dim") or h // nq
        return MixerCounts(params=p, kv_elements_per_token=2 * nkv * d, kv_window=spec.get("sliding_window"))
    if t == "mla":
        return MixerCounts(params=p, kv_elements_per_token=spec["kv_lora_rank"] + spec["qk_rope_head_dim"]
                           + (spec.get("index_head_dim") or 0))
    if t == "kda":
        n, d, k = spec["num_heads"], spec["head_dim"], spec.get("conv_kernel", 4)
        return MixerCounts(params=p, state_elements=n * d * d, conv_state_elements=(k - 1) * 3 * n * d)
    if t == "gated_deltanet":
        nk, nv = spec["num_k_heads"], spec["num_v_heads"]
        dk, dv = spec["head_k_dim"], spec["head_v_dim"]
        k = spec.get("conv_kernel", 4)
        return MixerCounts(params=p, state_elements=nv * dv * dk,
                           conv_state_elements=(k - 1) * (2 * nk * dk + nv * dv))
    if t == "lightning":
        n, d = spec["num_heads"], spec["head_dim"]
        return MixerCounts(params=p, state_elements=n * d * d)
    if t == "mamba":
        di = spec.get("d_inner") or spec.get("expand", 2) * h
        ds, dc = spec["d_state"], spec.get("d_conv", 4)
        return MixerCounts(params=p, state_elements=di * ds, conv_state_elements=di * (dc - 1))
    if t == "mamba2":
        di = spec.get("d_inner") or spec.get("expand", 2) * h
        ds, dc = spec["d_state"], spec.get("d_conv", 4)
        ng, nh = spec.get("n_groups", 1), spec["num_heads"]
        head_dim = spec.get("head_dim") or di // nh
        return MixerCounts(params=p, state_elements=nh * head_dim * ds,
                           conv_state_elements=(di + 2 * ng * ds) * (dc - 1))
    raise ValueError(f"unknown mixer type {t!r}")


def _mlp(prefix: str, h: int, i: int, role: str, *, gated: bool = True, bias: bool = False,
         count: int | None = None) -> list[Tensor]:
    """A (Swi)GLU MLP: gate, up, down (no gate when ``gated`` is false); ``count`` stacks experts."""
    lead = () if count is None else (count,)
    names = (("gate_proj", i, h), ("up_proj", i, h), ("down_proj", h, i)) if gated else \
        (("up_proj", i, h), ("down_proj", h, i))
    ts = []
    for name, out, inp in names:
        ts.append(Tensor(f"{prefix}.{name}.weight", (*lead, out, inp), linear=True, role=role))
        if bias:
            ts.append(Tensor(f"{prefix}.{name}.bias", (*lead, out), role=role))
    return ts


def ffn_tensors(spec: dict | None, hidden: int) -> list[Tensor]:
    """The tensors of one FFN ``spec`` (``dense`` (Swi)GLU or ``moe``); ``None`` means no FFN."""
    if spec is None:
        return []
    h = hidden
    t = spec["type"]
    gated = spec.get("gated", True)
    if t == "dense":
        return _mlp("mlp", h, spec["intermediate_size"], "dense", gated=gated, bias=bool(spec.get("bias")))
    if t == "moe":
        e = spec["num_experts"]
        i = spec["moe_intermediate_size"]
        latent = spec.get("latent_size")
        width = latent or h
        # the router is a plain parameter in the reference code, never a quantized Linear
        ts = [Tensor("mlp.gate.weight", (e, h), role="router")]
        if spec.get("router_bias"):
            ts.append(Tensor("mlp.gate.e_score_correction_bias", (e,), role="router"))
        if latent:
            ts += _lin("mlp.latent_down_proj", latent, h, role="latent") + _lin("mlp.latent_up_proj", h, latent, role="latent")
            if spec.get("latent_norm"):
                ts += _vec("mlp.latent_norm.weight", latent, role="latent")
        ts += _mlp("mlp.experts", width, i, "experts", gated=gated, bias=bool(spec.get("expert_bias")), count=e)
        n_shared = spec.get("num_shared_experts", 0)
        if n_shared:
            i_shared = spec.get("shared_intermediate_size") or i
            # shared experts are stored fused, one MLP of n_shared x the width
            ts += _mlp("mlp.shared_experts", h, n_shared * i_shared, "shared", gated=spec.get("shared_gated", gated))
        if spec.get("shared_expert_gate"):
            ts.append(Tensor("mlp.shared_expert_gate.weight", (1, h), role="shared"))
        return ts
    raise ValueError(f"unknown ffn type {t!r}")


def ffn_counts(spec: dict | None, hidden: int) -> FfnCounts:
    """Counts for one FFN ``spec`` (``dense`` (Swi)GLU or ``moe``); ``None`` means no FFN."""
    if spec is None:
        return FfnCounts(params=0, active_params=0)
    ts = ffn_tensors(spec, hidden)
    total = sum(x.numel for x in ts)
    if spec["type"] == "dense":
        return FfnCounts(params=total, active_params=total)
    e, k = spec["num_experts"], spec["experts_per_token"]
    routed = sum(x.numel for x in ts if x.role == "experts")
    expert = routed // e
    always = total - routed
    return FfnCounts(params=total, active_params=k * expert + always,
                     num_experts=e, expert_params=expert, shared_params=always)
