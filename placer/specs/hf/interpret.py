"""One interpreter of the keys decoder configs share, under their common spellings.

It turns a (text) config into one :class:`LayerPlan` per decoder layer: the token mixer and the FFN
in the vocabulary of :mod:`placer.specs.layers`. What a family does differently lives in
:mod:`placer.specs.hf.quirks`; nothing here dispatches on a model's name.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from placer.specs.hf.config import Config
from placer.specs.hf.quirks import Family

__all__ = ["LayerPlan", "Interpretation", "interpret"]

LAYERS = ("num_hidden_layers", "n_layers", "num_layers", "n_layer")
HIDDEN = ("hidden_size", "d_model", "n_embd", "dim")
HEADS = ("num_attention_heads", "n_heads", "num_heads", "n_head")
KV_HEADS = ("num_key_value_heads", "num_kv_heads", "n_kv_heads", "multi_query_group_num", "n_head_kv")
HEAD_DIM = ("head_dim", "attention_head_dim", "kv_channels")
VOCAB = ("vocab_size", "padded_vocab_size")
EXPERTS = ("n_routed_experts", "num_experts", "num_local_experts", "moe_num_experts", "n_experts")
TOP_K = ("num_experts_per_tok", "num_experts_per_token", "experts_per_token", "moe_k", "moe_topk", "top_k")
SHARED = ("n_shared_experts", "num_shared_experts", "moe_num_shared_experts", "num_shared_expert")
DENSE = ("intermediate_size", "ffn_hidden_size", "ffn_dim", "n_inner")
MTP = ("num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_layers", "mtp_num_layers")


@dataclass(frozen=True)
class LayerPlan:
    mixer: dict | None
    ffn: dict | None


@dataclass
class Interpretation:
    hidden: int
    vocab: int
    tie: bool
    layers: list[LayerPlan]
    norms_per_layer: int | None = None      # None: one per sub-block (placer's default)
    mtp: LayerPlan | None = None
    mtp_count: int = 0
    notes: list[str] = field(default_factory=list)
    max_positions: int | None = None
    dtype_bits: int = 16


# ----------------------------------------------------------------------------- per-layer types
def _layer_kinds(c: Config, n: int, fam: Family) -> list[str]:
    """Each layer's mixer kind: full, sliding, chunked, mla, kda, gdn, lightning, mamba, mamba2, none.

    Read from (in order) ``hybrid_override_pattern``, ``linear_attn_config``, ``layer_types`` /
    ``layers_block_type``, ``attn_type_list``, attention periods/offsets, ``full_attention_interval``,
    then sliding-window rules (``sliding_window_pattern``, ``use_sliding_window`` +
    ``max_window_layers``, ``no_rope_layers`` with ``attention_chunk_size``).
    """
    mla = c.has("kv_lora_rank")
    full = "mla" if mla else "full"
    if c.has("hybrid_override_pattern"):
        pat = c.text("hybrid_override_pattern")
        if len(pat) != n:
            raise c.fail("hybrid_override_pattern", f"has {len(pat)} characters but num_hidden_layers is {n}")
        table = {"M": "mamba2", "*": full, "-": "none", "E": "none"}
        bad = [i for i, ch in enumerate(pat) if ch not in table]
        if bad:
            raise c.fail("hybrid_override_pattern", f"character {pat[bad[0]]!r} at {bad[0]} is not one of M * - E")
        return [table[ch] for ch in pat]
    if c.has("linear_attn_config") and (c.section("linear_attn_config").has("kda_layers")
                                        or c.section("linear_attn_config").has("full_attn_layers")):
        la = c.section("linear_attn_config")
        kda = la.ints("kda_layers", [], minimum=1)
        fulls = la.ints("full_attn_layers", [], minimum=1)
        for key, ids in (("kda_layers", kda), ("full_attn_layers", fulls)):
            if any(i > n for i in ids):
                raise la.fail(key, f"lists layer {max(ids)} but num_hidden_layers is {n} (the lists are 1-based)")
            if len(set(ids)) != len(ids):
                raise la.fail(key, "lists a layer twice")
        if set(kda) & set(fulls) or len(kda) + len(fulls) != n:
            raise la.fail("kda_layers", f"kda_layers and full_attn_layers must split layers 1..{n} between them")
        ks = set(kda)
        return ["kda" if i + 1 in ks else full for i in range(n)]
    types_key = c.first("layer_types", "layers_block_type", "layer_type")
    if types_key is not None:
        types = c.texts(types_key, n, extra=_mtp_count(c))
        table = {"full_attention": full, "attention": full, "global": full, "sliding_attention": "sliding",
                 "sliding": "sliding", "local": "sliding", "chunked_attention": "chunked",
                 "linear_attention": None, "mamba": "mamba2" if fam.norms == 1 else "mamba", "mamba2": "mamba2",
                 "hybrid": None, "moe": "none", "mlp": "none", "indexed_attention": full,
                 # GLM-5.2 / 5.3: MLA with the DSA indexer on every such layer (the indexer comes from index_*)
                 "deepseek_sparse_attention": full}
        out = []
        for i, t in enumerate(types):
            if t not in table:
                raise c.fail(f"{types_key}.{i}", f"unknown layer type {t!r} (known: {', '.join(table)})")
            out.append(table[t] or _linear_kind(c, fam))
        return out
    if c.has("attn_type_list"):
        types = c.ints("attn_type_list")
        if len(types) != n:
            raise c.fail("attn_type_list", f"has {len(types)} entries but num_hidden_layers is {n}")
        bad = [i for i, t in enumerate(types) if t not in (0, 1)]
        if bad:
            raise c.fail(f"attn_type_list.{bad[0]}", "expected 0 (linear) or 1 (softmax attention)")
        return [full if t else "lightning" for t in types]
    if c.has("attn_layer_period"):
        period, offset = c.integer("attn_layer_period"), c.integer("attn_layer_offset", 0, minimum=0)
        return [full if i % period == offset else "mamba" for i in range(n)]
    if c.has("full_attention_interval"):
        k = c.integer("full_attention_interval")
        return [full if (i + 1) % k == 0 else _linear_kind(c, fam) for i in range(n)]
    if c.has("sliding_window_pattern") or c.has("sliding_window_pattern_period"):
        key = c.first("sliding_window_pattern", "sliding_window_pattern_period")
        k = c.integer(key)
        return [full if (i + 1) % k == 0 else "sliding" for i in range(n)]
    if c.has("attention_chunk_size"):
        rope = c.ints("no_rope_layers") if c.has("no_rope_layers") else \
            [int((i + 1) % c.integer("no_rope_layer_interval", 4) != 0) for i in range(n)]
        if len(rope) != n:
            raise c.fail("no_rope_layers", f"has {len(rope)} entries but num_hidden_layers is {n}")
        return ["chunked" if r else full for r in rope]
    if fam.sliding_period and c.has("sliding_window"):
        return ["sliding" if (i + 1) % fam.sliding_period else full for i in range(n)]
    if c.data.get("use_sliding_window") is True and c.has("sliding_window"):
        first = c.integer("max_window_layers", n, minimum=0)
        return ["sliding" if i >= first else full for i in range(n)]
    if c.data.get("use_sliding_window") is None and c.has("sliding_window") and not mla:
        return ["sliding"] * n     # Mistral-style: the window applies to every layer
    return [full] * n


def _linear_kind(c: Config, fam: Family) -> str:
    if c.has("linear_num_value_heads") or c.has("linear_num_key_heads"):
        return "gdn"
    if c.has("linear_attn_config"):
        return "kda"
    if c.has("mamba_d_state") or c.has("mamba_n_heads") or c.has("ssm_state_size"):
        return "mamba2" if c.has("mamba_n_heads") or c.has("mamba_num_heads") else "mamba"
    if fam.linear_kind:
        return fam.linear_kind
    raise c.fail("layer_types", "names linear layers but the config has no linear-attention dimensions "
                                "(linear_num_value_heads, linear_attn_config, mamba_*)")


def _mtp_count(c: Config) -> int:
    """MTP layers the config declares; a per-layer list may carry theirs after the decoder's."""
    key = c.first(*MTP)
    value = c.data.get(key) if key else 0
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 64 else 0


# ----------------------------------------------------------------------------- mixers
def _qk_norm(c: Config, fam: Family):
    q = fam.qk_norm
    if q == "none":
        return None
    if q == "key":
        return "head" if c.data.get("use_qk_norm") else None
    if q is None and c.data.get("use_qk_norm") and c.data.get("qk_norm_type") != "l2":
        return "head"
    return q


def _attention(c: Config, fam: Family, kind: str) -> dict:
    h = c.any_integer(HIDDEN)
    nq = c.any_integer(HEADS)
    nkv = c.any_integer(KV_HEADS, nq)
    d = c.any_integer(HEAD_DIM, None)
    if d is None:
        d = h // nq          # as the modeling code computes it when the config has no head_dim
        if d < 1:
            raise c.fail("head_dim", f"missing, and hidden_size {h} is smaller than num_attention_heads {nq}")
    bias = c.flag("attention_bias", False) if c.has("attention_bias") else bool(c.data.get("use_bias", False))
    qkv_bias = fam.qkv_bias if fam.qkv_bias is not None else bias
    o_bias = fam.o_bias if fam.o_bias is not None else bias
    if c.has("qkv_bias"):
        qkv_bias = c.flag("qkv_bias")
    m = {"type": "gqa", "num_heads": nq, "num_kv_heads": nkv, "head_dim": d}
    if kind in ("sliding", "chunked"):
        key = "sliding_window" if kind == "sliding" else "attention_chunk_size"
        if kind == "sliding" and not c.has("sliding_window"):
            raise c.fail("sliding_window", "layers use sliding-window attention but no window size is given")
        m.update(type="sliding", sliding_window=c.integer(key))
    qk = _qk_norm(c, fam)
    gated = fam.gated_attention and c.data.get("attn_output_gate", True) is not False
    for k, on in (("qkv_bias", qkv_bias), ("o_bias", o_bias), ("gated", gated), ("sinks", fam.sinks)):
        if on:
            m[k] = True
    if qk:
        m["qk_norm"] = True if qk == "head" else "full"
    return m


def _mla(c: Config, *, indexer: bool) -> dict:
    m = {"type": "mla", "num_heads": c.any_integer(HEADS)}
    qlr = c.integer("q_lora_rank", None)
    if qlr is not None:
        m["q_lora_rank"] = qlr
    m.update(kv_lora_rank=c.integer("kv_lora_rank"), qk_nope_head_dim=c.integer("qk_nope_head_dim", minimum=0),
             qk_rope_head_dim=c.integer("qk_rope_head_dim", minimum=0),
             v_head_dim=c.integer("v_head_dim"))
    if c.data.get("mla_use_output_gate"):
        m["output_gate"] = True
    if indexer:
        m["index_head_dim"] = c.integer("index_head_dim")
        m["index_num_heads"] = c.integer("index_n_heads")
    return m


def _kda(c: Config) -> dict:
    la = c.section("linear_attn_config")
    m = {"type": "kda", "num_heads": la.integer("num_heads"), "head_dim": la.integer("head_dim"),
         "conv_kernel": la.integer("short_conv_kernel_size", 4)}
    if la.data.get("use_full_rank_gate"):
        m["full_rank_gate"] = True
    return m


def _gdn(c: Config) -> dict:
    return {"type": "gated_deltanet", "num_k_heads": c.integer("linear_num_key_heads"),
            "num_v_heads": c.integer("linear_num_value_heads"),
            "head_k_dim": c.integer("linear_key_head_dim"), "head_v_dim": c.integer("linear_value_head_dim"),
            "conv_kernel": c.integer("linear_conv_kernel_dim", 4)}


def _lightning(c: Config) -> dict:
    h, nq = c.any_integer(HIDDEN), c.any_integer(HEADS)
    return {"type": "lightning", "num_heads": nq, "head_dim": c.any_integer(HEAD_DIM, h // nq)}


def _mamba(c: Config) -> dict:
    h = c.any_integer(HIDDEN)
    dt = c.data.get("mamba_dt_rank", c.data.get("time_step_rank", "auto"))
    dt_rank = -(-h // 16) if dt == "auto" else c.integer(c.first("mamba_dt_rank", "time_step_rank"))
    expand = c.any_integer(("mamba_expand", "expand"), 2)
    return {"type": "mamba", "d_inner": expand * h,
            "d_state": c.any_integer(("mamba_d_state", "state_size", "ssm_state_size"), 16),
            "d_conv": c.any_integer(("mamba_d_conv", "conv_kernel"), 4), "dt_rank": dt_rank}


def _mamba2(c: Config) -> dict:
    nh = c.any_integer(("mamba_num_heads", "mamba_n_heads"))
    hd = c.any_integer(("mamba_head_dim", "mamba_d_head"))
    m = {"type": "mamba2", "num_heads": nh, "head_dim": hd, "d_inner": nh * hd,
         "d_state": c.any_integer(("ssm_state_size", "mamba_d_state")),
         "d_conv": c.any_integer(("conv_kernel", "mamba_d_conv"), 4),
         "n_groups": c.any_integer(("n_groups", "mamba_n_groups"), 1)}
    if c.data.get("use_bias", c.data.get("mamba_proj_bias", False)):
        m["proj_bias"] = True
    if c.data.get("use_conv_bias", c.data.get("mamba_conv_bias", True)) is False:
        m["conv_bias"] = False
    return m


def _mixer(c: Config, fam: Family, kind: str) -> dict | None:
    if kind == "none":
        return None
    if kind == "mla":
        return _mla(c, indexer=c.has("index_head_dim"))
    if kind in ("full", "sliding", "chunked"):
        return _attention(c, fam, kind)
    return {"kda": _kda, "gdn": _gdn, "lightning": _lightning, "mamba": _mamba, "mamba2": _mamba2}[kind](c)


# ----------------------------------------------------------------------------- FFNs
def _moe_layers(c: Config, n: int, kinds: list[str]) -> list[bool]:
    """Which layers hold routed experts, under every spelling of the rule."""
    if c.has("hybrid_override_pattern"):
        pat = c.text("hybrid_override_pattern")
        return [ch == "E" for ch in pat]
    if isinstance(c.data.get("layers_block_type"), list) and "moe" in c.data["layers_block_type"]:
        return [t == "moe" for t in c.texts("layers_block_type", n)]
    if c.has("mlp_layer_types"):
        types = c.texts("mlp_layer_types", n, extra=_mtp_count(c))
        return [t in ("sparse", "moe") for t in types]
    if c.has("interleave_moe_layer_step"):
        step = c.integer("interleave_moe_layer_step")
        if c.has("moe_layers"):
            ids = set(c.ints("moe_layers"))
            return [i in ids for i in range(n)]
        return [(i + 1) % step == 0 for i in range(n)]
    if c.has("expert_layer_period"):
        p, o = c.integer("expert_layer_period"), c.integer("expert_layer_offset", 0, minimum=0)
        return [i % p == o for i in range(n)]
    if c.has("moe_layer_start_index") or c.has("moe_layer_interval"):
        start = c.integer("moe_layer_start_index", 0, minimum=0)
        end = c.integer("moe_layer_end_index", n - 1, minimum=0) if not (
            isinstance(c.data.get("moe_layer_end_index"), int) and c.data["moe_layer_end_index"] < 0) else n - 1
        step = c.integer("moe_layer_interval", 1)
        return [start <= i <= end and (i - start) % step == 0 for i in range(n)]
    if isinstance(c.data.get("moe_layer_freq"), list):
        freq = c.ints("moe_layer_freq")
        if len(freq) != n:
            raise c.fail("moe_layer_freq", f"has {len(freq)} entries but num_hidden_layers is {n}")
        return [bool(x) for x in freq]
    first_dense = c.integer("first_k_dense_replace", 0, minimum=0)
    freq = c.integer("moe_layer_freq", 1)
    step = c.integer("decoder_sparse_step", 1)
    mlp_only = set(c.ints("mlp_only_layers", []))
    return [i >= first_dense and i % freq == 0 and (i + 1) % step == 0 and i not in mlp_only for i in range(n)]


def _router_bias(c: Config, fam: Family) -> bool:
    rb = fam.router_bias
    if isinstance(rb, str) and rb.startswith("key:"):
        return bool(c.data.get(rb[4:], False))
    if c.has("topk_method") and c.text("topk_method") != "noaux_tc" and rb is True and not c.has("kv_lora_rank"):
        return False
    if c.has("moe_use_aux_free"):
        return bool(c.data["moe_use_aux_free"])
    return bool(rb)


def _moe(c: Config, fam: Family, experts: int) -> dict:
    k_key = c.first(*TOP_K)
    if k_key is None:
        raise c.fail(TOP_K[0], f"required key is missing (also looked for {', '.join(TOP_K[1:])})")
    top_k = c.integer(k_key)
    if top_k > experts:
        raise c.fail(k_key, f"{top_k} experts per token exceed the {experts} experts")
    i_key = c.first("moe_intermediate_size", "expert_intermediate_size", "moe_ffn_hidden_size")
    size = c.integer(i_key) if i_key else c.any_integer(DENSE)
    f = {"type": "moe", "num_experts": experts, "experts_per_token": top_k, "moe_intermediate_size": size}
    shared_i = c.any_integer(("shared_expert_intermediate_size", "moe_shared_expert_intermediate_size",
                              "shared_intermediate_size"), 0, minimum=0)
    n_shared = c.any_integer(SHARED, 0, minimum=0)
    if shared_i and not n_shared:
        n_shared = 1
    if n_shared:
        f["num_shared_experts"] = n_shared
        if shared_i and shared_i != size:
            f["shared_intermediate_size"] = shared_i
        if fam.shared_expert_gate and (shared_i or n_shared):
            f["shared_expert_gate"] = True
    if not fam.gated_mlp:
        f["gated"] = False
    if _router_bias(c, fam):
        f["router_bias"] = True
    latent = c.integer(c.first("routed_expert_hidden_size", "moe_latent_size") or "routed_expert_hidden_size", None)
    if latent:
        f["latent_size"] = latent
        if c.data.get("latent_moe_use_norm"):
            f["latent_norm"] = True
    if fam.expert_bias or (c.data.get("mlp_bias") and not fam.gated_mlp):
        f["expert_bias"] = True
    return f


def _dense(c: Config, fam: Family) -> dict:
    key = c.first("intermediate_size_mlp", *DENSE) if c.has("interleave_moe_layer_step") else c.first(*DENSE)
    if key is None:
        raise c.fail("intermediate_size", "required key is missing (also looked for "
                                          f"{', '.join(DENSE[1:])})")
    f = {"type": "dense", "intermediate_size": c.integer(key)}
    if c.data.get("mlp_bias") or (c.data.get("use_bias") and fam.norms != 1):
        f["bias"] = True
    if not fam.gated_mlp:
        f["gated"] = False
    return f


def _block_configs(c: Config, fam: Family, n: int) -> list[LayerPlan]:
    """DeciLM / Nemotron-NAS: each layer's attention and FFN from ``block_configs`` (absent with
    ``no_op``; GQA with ``num_attention_heads // n_heads_in_group`` KV heads; a SwiGLU of width
    ``int(2 * ffn_mult * h / 3)`` rounded up to a multiple of 256)."""
    blocks = c.data["block_configs"]
    if not isinstance(blocks, list) or len(blocks) != n:
        raise c.fail("block_configs", f"expected one entry per layer ({n})")
    h, nq = c.any_integer(HIDDEN), c.any_integer(HEADS)
    plans = []
    for i, raw in enumerate(blocks):
        b = c.sub(raw, f"block_configs.{i}") if isinstance(raw, dict) else None
        if b is None:
            raise c.fail(f"block_configs.{i}", "expected a mapping")
        a, f = b.section("attention"), b.section("ffn")
        for part in (a, f):
            if part.data.get("replace_with_linear"):
                raise part.fail("replace_with_linear", "a sub-block replaced by one linear map is not read")
        mixer = None
        if not a.flag("no_op", False):
            group = a.integer("n_heads_in_group")
            if nq % group:
                raise a.fail("n_heads_in_group", f"does not divide num_attention_heads {nq}")
            mixer = {"type": "gqa", "num_heads": nq, "num_kv_heads": nq // group, "head_dim": h // nq}
        ffn = None
        if not f.flag("no_op", False):
            mult = f.data.get("ffn_mult")
            if isinstance(mult, bool) or not isinstance(mult, (int, float)) or not 0 < mult < 1000:
                raise f.fail("ffn_mult", f"expected a positive number, got {mult!r}")
            width = -(-int(2 * mult * h / 3) // 256) * 256
            ffn = {"type": "dense", "intermediate_size": width}
        if mixer is None and ffn is None:
            raise b.fail("attention", "a layer with neither attention nor an FFN")
        plans.append(LayerPlan(mixer, ffn))
    return plans


# ----------------------------------------------------------------------------- the whole model
def interpret(c: Config, fam: Family) -> Interpretation:
    """Every decoder layer's mixer and FFN; ``c`` is the text config, ``fam`` its quirks row."""
    if fam.defaults:
        c = Config({**fam.defaults, **{k: v for k, v in c.data.items() if v is not None}}, c.source, c.prefix)
    lists = [k for k in ("layers_block_type", "layer_types", "hybrid_override_pattern") if c.has(k)]
    if not c.first(*LAYERS) and lists and isinstance(c.data[lists[0]], (list, str)):
        n = len(c.data[lists[0]])       # the per-layer list is the layer count
    else:
        n = c.any_integer(LAYERS)
    h = c.any_integer(HIDDEN)
    vocab = c.any_integer(VOCAB)
    tie = c.flag("tie_word_embeddings", fam.tie)
    if isinstance(c.data.get("block_configs"), list):
        out = Interpretation(hidden=h, vocab=vocab, tie=tie, layers=_block_configs(c, fam, n))
        mp = c.data.get("max_position_embeddings")
        if isinstance(mp, int) and not isinstance(mp, bool) and 0 < mp <= 2**40:
            out.max_positions = mp
        return out
    kinds = _layer_kinds(c, n, fam)
    experts = c.any_integer(EXPERTS, 0, minimum=0)
    moe = _moe_layers(c, n, kinds) if experts > 1 else [False] * n
    mixers: dict[str, dict | None] = {}
    layers = []
    moe_spec = _moe(c, fam, experts) if any(moe) else None
    dense_spec = None
    for i, kind in enumerate(kinds):
        if kind not in mixers:
            mixers[kind] = _mixer(c, fam, kind)
        mixer = mixers[kind]
        if fam.norms == 1 and mixer is not None:
            ffn = None                      # one sub-block per layer: a mixer, or an FFN alone
        elif moe[i]:
            ffn = moe_spec
        else:
            if dense_spec is None:
                dense_spec = _dense(c, fam)
            ffn = dense_spec
        layers.append(LayerPlan(mixer, ffn))
    out = Interpretation(hidden=h, vocab=vocab, tie=tie, layers=layers,
                         norms_per_layer=None if fam.norms == 2 else fam.norms * h)
    if fam.norms == 1:
        out.norms_per_layer = h
    mtp_key = c.first(*MTP)
    if mtp_key:
        count = c.integer(mtp_key, minimum=0)
        if count:
            last_full = next((p for p in reversed(layers) if p.mixer and p.mixer["type"] in ("mla", "gqa")), layers[-1])
            out.mtp = LayerPlan(last_full.mixer, moe_spec or dense_spec or last_full.ffn)
            out.mtp_count = count
    mp = c.data.get("max_position_embeddings")
    if isinstance(mp, int) and not isinstance(mp, bool) and 0 < mp <= 2**40:
        out.max_positions = mp
    return out

