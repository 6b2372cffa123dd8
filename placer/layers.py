"""Exact per-layer counts from architecture dimensions.

Each mixer and FFN kind knows its parameter count, its KV-cache elements per token and its
recurrent-state elements per request. Formulas follow the reference implementations
(transformers / vLLM / vendor code); the derivations are in docs and tests:

* GQA/MHA: ``h*(n_q*d) + 2*h*(n_kv*d) + (n_q*d)*h`` (+ biases, q/k norms, output gate, sinks);
  KV per token ``2*n_kv*d``; a sliding window bounds the cached tokens.
* MLA: ``h*q_lora + q_lora*n*(d_nope+d_rope) + h*(kv_lora+d_rope) + kv_lora*n*(d_nope+d_v) + n*d_v*h``
  (+ norms); KV per token ``kv_lora + d_rope``.
* KDA: q/k/v projections, decay and gate low-rank projections, beta, three short convs;
  state ``heads*d*d`` (recurrent) and ``(kernel-1)*(q+k+v dims)`` (conv).
* Gated DeltaNet: fused qkvz and ba projections, one conv over q,k,v; state ``nv*dv*dk`` and
  ``(kernel-1)*(2*nk*dk + nv*dv)``.
* Lightning attention: qkv, output gate, out projection; state ``heads*d*d``.
* Mamba-1: state ``d_inner*d_state`` and conv ``d_inner*(d_conv-1)``; Mamba-2 per its paper.
* SwiGLU FFN ``3*h*I``; MoE ``E*3*h*I + shared + router``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MixerCounts", "FfnCounts", "mixer_counts", "ffn_counts", "ATTENTION_MIXERS", "LINEAR_MIXERS"]

ATTENTION_MIXERS = ("mha", "gqa", "mla", "sliding")
LINEAR_MIXERS = ("kda", "gated_deltanet", "lightning", "mamba", "mamba2")


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


def _get(d: dict, key: str, default=None):
    value = d.get(key, default)
    return value


def mixer_counts(spec: dict, hidden: int) -> MixerCounts:
    """Counts for one token mixer ``spec`` (a validated dict with a ``type``) at hidden size ``hidden``."""
    t = spec["type"]
    h = hidden
    if t in ("mha", "gqa", "sliding"):
        nq = spec["num_heads"]
        nkv = spec.get("num_kv_heads") or nq
        d = spec.get("head_dim") or h // nq
        q_out = nq * d * (2 if spec.get("gated") else 1)
        p = h * q_out + 2 * h * nkv * d + nq * d * h
        if spec.get("qkv_bias"):
            p += nq * d + 2 * nkv * d
        if spec.get("o_bias"):
            p += h
        if spec.get("qk_norm"):
            p += 2 * d
        if spec.get("sinks"):
            p += nq
        window = spec.get("sliding_window")
        return MixerCounts(params=p, kv_elements_per_token=2 * nkv * d, kv_window=window)
    if t == "mla":
        n = spec["num_heads"]
        qlr = spec.get("q_lora_rank")
        kvr = spec["kv_lora_rank"]
        dn, dr, dv = spec["qk_nope_head_dim"], spec["qk_rope_head_dim"], spec["v_head_dim"]
        if qlr:
            p = h * qlr + qlr * n * (dn + dr) + qlr
        else:
            p = h * n * (dn + dr)
        p += h * (kvr + dr) + kvr * n * (dn + dv) + kvr + n * dv * h
        return MixerCounts(params=p, kv_elements_per_token=kvr + dr)
    if t == "kda":
        n = spec["num_heads"]
        d = spec["head_dim"]
        k = spec.get("conv_kernel", 4)
        proj = n * d
        p = 3 * h * proj                      # q, k, v
        p += (h * d + d * proj) * 2           # decay (f_a, f_b) and output gate (g_a, g_b) low-rank
        p += h * n                            # beta
        p += 3 * proj * k                     # q, k, v short convs (depthwise)
        p += n + proj                         # A_log, dt_bias
        p += d                                # output norm
        p += proj * h                         # o_proj
        return MixerCounts(params=p, state_elements=n * d * d, conv_state_elements=(k - 1) * 3 * proj)
    if t == "gated_deltanet":
        nk, nv = spec["num_k_heads"], spec["num_v_heads"]
        dk, dv = spec["head_k_dim"], spec["head_v_dim"]
        k = spec.get("conv_kernel", 4)
        key_dim, value_dim = nk * dk, nv * dv
        conv_dim = 2 * key_dim + value_dim
        p = h * (2 * key_dim + 2 * value_dim)  # in_proj_qkvz
        p += h * 2 * nv                        # in_proj_ba
        p += conv_dim * k                      # conv1d (no bias)
        p += 2 * nv                            # dt_bias, A_log
        p += dv                                # gated RMS norm
        p += value_dim * h                     # out_proj
        return MixerCounts(params=p, state_elements=nv * dv * dk, conv_state_elements=(k - 1) * conv_dim)
    if t == "lightning":
        n, d = spec["num_heads"], spec["head_dim"]
        inner = n * d
        p = h * 3 * inner + h * inner + inner * h + inner  # qkv, output gate, out, norm
        return MixerCounts(params=p, state_elements=n * d * d)
    if t == "mamba":
        di = spec.get("d_inner") or spec.get("expand", 2) * h
        ds, dc = spec["d_state"], spec.get("d_conv", 4)
        dtr = spec.get("dt_rank") or -(-h // 16)
        p = h * 2 * di                      # in_proj
        p += di * dc + di                   # conv1d with bias
        p += di * (dtr + 2 * ds)            # x_proj
        p += dtr * di + di                  # dt_proj
        p += di * ds + di                   # A_log, D
        p += di * h                         # out_proj
        return MixerCounts(params=p, state_elements=di * ds, conv_state_elements=di * (dc - 1))
    if t == "mamba2":
        di = spec.get("d_inner") or spec.get("expand", 2) * h
        ds, dc = spec["d_state"], spec.get("d_conv", 4)
        ng, nh = spec.get("n_groups", 1), spec["num_heads"]
        conv_dim = di + 2 * ng * ds
        p = h * (2 * di + 2 * ng * ds + nh)  # in_proj: z, x, B, C, dt
        p += conv_dim * dc + conv_dim        # conv1d with bias
        p += 3 * nh                          # dt_bias, A_log, D
        p += di                              # norm
        p += di * h                          # out_proj
        return MixerCounts(params=p, state_elements=nh * (di // nh) * ds,
                           conv_state_elements=conv_dim * (dc - 1))
    raise ValueError(f"unknown mixer type {t!r}")


def ffn_counts(spec: dict | None, hidden: int) -> FfnCounts:
    """Counts for one FFN ``spec`` (``dense`` SwiGLU or ``moe``); ``None`` means no FFN."""
    if spec is None:
        return FfnCounts(params=0, active_params=0)
    h = hidden
    t = spec["type"]
    if t == "dense":
        i = spec["intermediate_size"]
        p = 3 * h * i + (2 * i + h if spec.get("bias") else 0)
        return FfnCounts(params=p, active_params=p)
    if t == "moe":
        e, k = spec["num_experts"], spec["experts_per_token"]
        i = spec["moe_intermediate_size"]
        expert = 3 * h * i + (2 * i + h if spec.get("expert_bias") else 0)
        n_shared = spec.get("num_shared_experts", 0)
        i_shared = spec.get("shared_intermediate_size") or i
        shared = n_shared * 3 * h * i_shared
        if spec.get("shared_expert_gate"):
            shared += h
        router = e * h + (e if spec.get("router_bias") else 0)
        total = e * expert + shared + router
        return FfnCounts(params=total, active_params=k * expert + shared + router,
                         num_experts=e, expert_params=expert, shared_params=shared + router)
    raise ValueError(f"unknown ffn type {t!r}")
