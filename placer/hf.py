"""Hugging Face ``config.json`` -> a compact-form model spec (the same schema as ``models/*.yaml``).

Supported architectures (``architectures[0]``, else ``model_type``): DeepseekV3 (DeepSeek-V3,
Kimi K2), KimiLinear, Qwen3Next, Qwen3Moe, Llama, MiniMaxText01 / MiniMax, Jamba, GptOss. Each
reader follows the layer-construction rules of the reference implementation (transformers /
vLLM / vendor code) and names every key it needs; a missing or ill-typed key raises
:class:`~placer.errors.InvalidSpec` naming that key. Keys that do not change memory (rope, norm
epsilon, routing scale, ...) are ignored. Multi-token-prediction layers are not counted: they
are a speculative-decoding add-on, not part of the main pipeline (a note says how many).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import yaml

from .errors import InvalidSpec
from .spec_io import atomic_write_text, load_yaml_or_json

__all__ = ["spec_from_hf_config", "compress_pattern", "import_hf", "spec_to_yaml", "SUPPORTED_ARCHITECTURES"]

_REQUIRED = object()
_MAX = 10**12  # no real dimension comes near; anything above is a typo


class _Config:
    """Typed access to a config mapping; every failure names the dotted key."""

    def __init__(self, data: dict, source: str, prefix: str = ""):
        self.data = data
        self.source = source
        self.prefix = prefix

    def _key(self, key: str) -> str:
        return f"{self.prefix}{key}"

    def fail(self, key: str, message: str) -> InvalidSpec:
        return InvalidSpec(self.source, self._key(key), message)

    def _raw(self, key: str, default):
        value = self.data.get(key)
        if value is None:
            if default is _REQUIRED:
                raise self.fail(key, "required key is missing" if key not in self.data else "must not be null")
            return default
        return value

    def integer(self, key: str, default=_REQUIRED, *, minimum: int = 1):
        value = self._raw(key, default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"expected an integer, got {type(value).__name__} {value!r}")
        if not minimum <= value <= _MAX:
            raise self.fail(key, f"must be between {minimum} and {_MAX}, got {value}")
        return value

    def flag(self, key: str, default=_REQUIRED) -> bool:
        value = self._raw(key, default)
        if not isinstance(value, bool):
            raise self.fail(key, f"expected true or false, got {type(value).__name__} {value!r}")
        return value

    def text(self, key: str, default=_REQUIRED):
        value = self._raw(key, default)
        if value is not None and not isinstance(value, str):
            raise self.fail(key, f"expected a string, got {type(value).__name__} {value!r}")
        return value

    def ints(self, key: str, default=_REQUIRED, *, minimum: int = 0) -> list[int]:
        value = self._raw(key, default)
        if not isinstance(value, list):
            raise self.fail(key, f"expected a list of integers, got {type(value).__name__}")
        for i, x in enumerate(value):
            if isinstance(x, bool) or not isinstance(x, int) or not minimum <= x <= _MAX:
                raise self.fail(f"{key}.{i}", f"expected an integer >= {minimum}, got {x!r}")
        return value

    def texts(self, key: str, length: int, allowed: tuple[str, ...]) -> list[str]:
        value = self._raw(key, _REQUIRED)
        if not isinstance(value, list):
            raise self.fail(key, f"expected a list of strings, got {type(value).__name__}")
        if len(value) != length:
            raise self.fail(key, f"has {len(value)} entries but num_hidden_layers is {length}")
        for i, x in enumerate(value):
            if x not in allowed:
                raise self.fail(f"{key}.{i}", f"expected one of {', '.join(allowed)}, got {x!r}")
        return value

    def section(self, key: str) -> _Config:
        value = self._raw(key, _REQUIRED)
        if not isinstance(value, dict):
            raise self.fail(key, f"expected a mapping, got {type(value).__name__}")
        return _Config(value, self.source, prefix=f"{self._key(key)}.")


class _Build:
    """What an architecture reader produces: named mixers and FFNs, and one (mixer, ffn) per layer."""

    def __init__(self, hidden: int, vocab: int, tie: bool, letters: dict[tuple[str, str | None], str]):
        self.hidden = hidden
        self.vocab = vocab
        self.tie = tie
        self.letters = letters
        self.mixers: dict[str, dict] = {}
        self.ffns: dict[str, dict] = {}
        self.layers: list[tuple[str, str | None]] = []
        self.notes: list[str] = []


def _common(c: _Config, letters) -> tuple[_Build, int]:
    b = _Build(hidden=c.integer("hidden_size"), vocab=c.integer("vocab_size"),
               tie=c.flag("tie_word_embeddings", False), letters=letters)
    return b, c.integer("num_hidden_layers")


def _attention(c: _Config, *, qk_norm: bool = False, gated: bool = False, sinks: bool = False,
               window: int | None = None, bias_default: bool = False) -> dict:
    """A GQA (or sliding-window GQA) mixer from the usual attention keys."""
    h = c.integer("hidden_size")
    nq = c.integer("num_attention_heads")
    nkv = c.integer("num_key_value_heads", nq)
    d = c.integer("head_dim", None)
    if d is None:
        if h % nq:
            raise c.fail("head_dim", f"missing, and hidden_size {h} is not a multiple of num_attention_heads {nq}")
        d = h // nq
    bias = c.flag("attention_bias", bias_default)
    m = {"type": "sliding" if window else "gqa", "num_heads": nq, "num_kv_heads": nkv, "head_dim": d}
    if window:
        m["sliding_window"] = window
    for flag, on in (("qkv_bias", bias), ("o_bias", bias), ("qk_norm", qk_norm), ("gated", gated),
                     ("sinks", sinks)):
        if on:
            m[flag] = True
    return m


def _mla(c: _Config) -> dict:
    m = {"type": "mla", "num_heads": c.integer("num_attention_heads")}
    qlr = c.integer("q_lora_rank", None)
    if qlr is not None:
        m["q_lora_rank"] = qlr
    m.update(kv_lora_rank=c.integer("kv_lora_rank"), qk_nope_head_dim=c.integer("qk_nope_head_dim", minimum=0),
             qk_rope_head_dim=c.integer("qk_rope_head_dim", minimum=0), v_head_dim=c.integer("v_head_dim"))
    return m


def _moe(num_experts: int, top_k: int, intermediate: int, *, where: _Config, top_k_key: str,
         shared: int = 0, shared_intermediate: int | None = None, **flags) -> dict:
    if top_k > num_experts:
        raise where.fail(top_k_key, f"{top_k} experts per token exceed the {num_experts} experts")
    f = {"type": "moe", "num_experts": num_experts, "experts_per_token": top_k,
         "moe_intermediate_size": intermediate}
    if shared:
        f["num_shared_experts"] = shared
        if shared_intermediate is not None and shared_intermediate != intermediate:
            f["shared_intermediate_size"] = shared_intermediate
    f.update({k: True for k, on in flags.items() if on})
    return f


def _mtp_note(b: _Build, c: _Config) -> None:
    n = c.integer("num_nextn_predict_layers", 0, minimum=0)
    if n:
        b.notes.append(f"{n} multi-token-prediction layer(s) in the checkpoint are not counted "
                       "(speculative decoding add-on, outside the main pipeline)")


# ----------------------------------------------------------------------------- architectures
def _dense_then_moe(b: _Build, c: _Config, n: int, *, experts_key: str, top_k_key: str, shared_key: str,
                    router_bias) -> list[bool]:
    """DeepSeek-style FFNs: dense below ``first_k_dense_replace``, MoE every ``moe_layer_freq`` above.

    Adds the ``dense`` / ``moe`` FFN specs the layers need to ``b`` and returns which layers are MoE;
    ``router_bias`` is called only when some layer is MoE.
    """
    experts = c.integer(experts_key, None)
    first_dense = c.integer("first_k_dense_replace", 0, minimum=0)
    freq = c.integer("moe_layer_freq", 1)
    is_moe = [experts is not None and i >= first_dense and i % freq == 0 for i in range(n)]
    if not all(is_moe):
        b.ffns["dense"] = {"type": "dense", "intermediate_size": c.integer("intermediate_size")}
    if any(is_moe):
        b.ffns["moe"] = _moe(experts, c.integer(top_k_key), c.integer("moe_intermediate_size"),
                             where=c, top_k_key=top_k_key, shared=c.integer(shared_key, 0, minimum=0),
                             router_bias=router_bias())
    return is_moe


def _deepseek_v3(c: _Config) -> _Build:
    """DeepSeek-V3 / Kimi K2: MLA everywhere; dense MLP below ``first_k_dense_replace``, MoE above."""
    b, n = _common(c, {("mla", "dense"): "D", ("mla", "moe"): "E"})
    b.mixers["mla"] = _mla(c)
    # noaux_tc routing adds a learned per-expert score-correction bias to the router
    is_moe = _dense_then_moe(b, c, n, experts_key="n_routed_experts", top_k_key="num_experts_per_tok",
                             shared_key="n_shared_experts",
                             router_bias=lambda: c.text("topk_method", "noaux_tc") == "noaux_tc")
    b.layers = [("mla", "moe" if m else "dense") for m in is_moe]
    _mtp_note(b, c)
    return b


def _kimi_linear(c: _Config) -> _Build:
    """Kimi Linear: KDA and MLA layers listed (1-based) in ``linear_attn_config``; MoE as DeepSeek-V3."""
    b, n = _common(c, {("kda", "dense"): "D", ("kda", "moe"): "K", ("mla", "dense"): "A", ("mla", "moe"): "M"})
    la = c.section("linear_attn_config")
    kda = la.ints("kda_layers", minimum=1)
    full = la.ints("full_attn_layers", minimum=1)
    for key, ids in (("kda_layers", kda), ("full_attn_layers", full)):
        if any(i > n for i in ids):
            raise la.fail(key, f"lists layer {max(ids)} but num_hidden_layers is {n} (the lists are 1-based)")
        if len(set(ids)) != len(ids):
            raise la.fail(key, "lists a layer twice")
    if set(kda) & set(full) or len(kda) + len(full) != n:
        raise la.fail("kda_layers", f"kda_layers and full_attn_layers must split layers 1..{n} between them")
    b.mixers["kda"] = {"type": "kda", "num_heads": la.integer("num_heads"), "head_dim": la.integer("head_dim"),
                       "conv_kernel": la.integer("short_conv_kernel_size", 4)}
    b.mixers["mla"] = _mla(c)
    # sigmoid routing carries a per-expert score-correction bias
    is_moe = _dense_then_moe(b, c, n, experts_key="num_experts", top_k_key="num_experts_per_token",
                             shared_key="num_shared_experts",
                             router_bias=lambda: c.text("moe_router_activation_func", "sigmoid") == "sigmoid")
    kda_set = set(kda)
    b.layers = [("kda" if i + 1 in kda_set else "mla", "moe" if is_moe[i] else "dense") for i in range(n)]
    _mtp_note(b, c)
    return b


def _qwen_sparse(c: _Config, n: int) -> list[bool]:
    """Qwen MoE rule: MoE unless listed in ``mlp_only_layers``, every ``decoder_sparse_step`` layers."""
    experts = c.integer("num_experts", 0, minimum=0)
    step = c.integer("decoder_sparse_step", 1)
    mlp_only = set(c.ints("mlp_only_layers", []))
    return [experts > 0 and i not in mlp_only and (i + 1) % step == 0 for i in range(n)]


def _qwen3_next(c: _Config) -> _Build:
    """Qwen3-Next: Gated DeltaNet with gated full attention every ``full_attention_interval`` layers."""
    b, n = _common(c, {("gdn", "moe"): "G", ("attention", "moe"): "A",
                       ("gdn", "dense"): "g", ("attention", "dense"): "a"})
    if "layer_types" in c.data:
        full = [t == "full_attention" for t in c.texts("layer_types", n, ("linear_attention", "full_attention"))]
    else:
        interval = c.integer("full_attention_interval", 4)
        full = [(i + 1) % interval == 0 for i in range(n)]
    b.mixers["gdn"] = {"type": "gated_deltanet", "num_k_heads": c.integer("linear_num_key_heads"),
                       "num_v_heads": c.integer("linear_num_value_heads"),
                       "head_k_dim": c.integer("linear_key_head_dim"), "head_v_dim": c.integer("linear_value_head_dim"),
                       "conv_kernel": c.integer("linear_conv_kernel_dim", 4)}
    b.mixers["attention"] = _attention(c, qk_norm=True, gated=True)
    is_moe = _qwen_sparse(c, n)
    if any(is_moe):
        shared_i = c.integer("shared_expert_intermediate_size", 0, minimum=0)
        b.ffns["moe"] = _moe(c.integer("num_experts"), c.integer("num_experts_per_tok"), c.integer("moe_intermediate_size"),
                             where=c, top_k_key="num_experts_per_tok", shared=1 if shared_i else 0,
                             shared_intermediate=shared_i or None, shared_expert_gate=bool(shared_i))
    if not all(is_moe):
        b.ffns["dense"] = {"type": "dense", "intermediate_size": c.integer("intermediate_size")}
    b.layers = [("attention" if f else "gdn", "moe" if m else "dense") for f, m in zip(full, is_moe)]
    return b


def _sliding_types(c: _Config, n: int, rule: Callable[[int], bool] | None = None) -> list[bool]:
    """Which layers use sliding-window attention: ``layer_types`` if given, else ``rule``."""
    if "layer_types" in c.data:
        return [t == "sliding_attention"
                for t in c.texts("layer_types", n, ("full_attention", "sliding_attention"))]
    return [bool(rule and rule(i)) for i in range(n)]


def _attention_layers(b: _Build, c: _Config, sliding: list[bool], **attn) -> list[str]:
    b.mixers["attention"] = _attention(c, **attn)
    if any(sliding):
        b.mixers["sliding"] = _attention(c, window=c.integer("sliding_window"), **attn)
    return ["sliding" if s else "attention" for s in sliding]


def _qwen3_moe(c: _Config) -> _Build:
    """Qwen3-MoE (Qwen3-235B-A22B): GQA with q/k norms; sliding window only when enabled."""
    b, n = _common(c, {("attention", "moe"): "A", ("attention", "dense"): "D",
                       ("sliding", "moe"): "S", ("sliding", "dense"): "s"})
    first_sliding = c.integer("max_window_layers", n, minimum=0)
    use_sliding = c.flag("use_sliding_window", False)
    mixers = _attention_layers(b, c, _sliding_types(c, n, lambda i: use_sliding and i >= first_sliding),
                               qk_norm=True)
    is_moe = _qwen_sparse(c, n)
    if any(is_moe):
        b.ffns["moe"] = _moe(c.integer("num_experts"), c.integer("num_experts_per_tok"), c.integer("moe_intermediate_size"),
                             where=c, top_k_key="num_experts_per_tok")
    if not all(is_moe):
        b.ffns["dense"] = {"type": "dense", "intermediate_size": c.integer("intermediate_size")}
    b.layers = [(m, "moe" if e else "dense") for m, e in zip(mixers, is_moe)]
    return b


def _llama(c: _Config) -> _Build:
    """Llama: GQA and a SwiGLU MLP in every layer."""
    b, n = _common(c, {("attention", "dense"): "A", ("sliding", "dense"): "S"})
    mixers = _attention_layers(b, c, _sliding_types(c, n))
    dense = {"type": "dense", "intermediate_size": c.integer("intermediate_size")}
    if c.flag("mlp_bias", False):
        dense["bias"] = True
    b.ffns["dense"] = dense
    b.layers = [(m, "dense") for m in mixers]
    return b


def _minimax(c: _Config) -> _Build:
    """MiniMax-Text-01: lightning (linear) attention, softmax attention where ``attn_type_list`` is 1."""
    b, n = _common(c, {("lightning", "moe"): "L", ("attention", "moe"): "S"})
    if "attn_type_list" in c.data:
        types = c.ints("attn_type_list", minimum=0)
        if len(types) != n:
            raise c.fail("attn_type_list", f"has {len(types)} entries but num_hidden_layers is {n}")
        bad = [i for i, t in enumerate(types) if t not in (0, 1)]
        if bad:
            raise c.fail(f"attn_type_list.{bad[0]}", "expected 0 (lightning) or 1 (softmax attention)")
        softmax = [t == 1 for t in types]
    else:
        softmax = [t == "full_attention"
                   for t in c.texts("layer_types", n, ("linear_attention", "full_attention"))]
    h, nq = c.integer("hidden_size"), c.integer("num_attention_heads")
    b.mixers["lightning"] = {"type": "lightning", "num_heads": nq, "head_dim": c.integer("head_dim", h // nq)}
    b.mixers["attention"] = _attention(c)
    shared_i = c.integer("shared_intermediate_size", 0, minimum=0)
    b.ffns["moe"] = _moe(c.integer("num_local_experts"), c.integer("num_experts_per_tok"), c.integer("intermediate_size"),
                         where=c, top_k_key="num_experts_per_tok", shared=1 if shared_i else 0,
                         shared_intermediate=shared_i or None)
    b.layers = [("attention" if s else "lightning", "moe") for s in softmax]
    return b


def _jamba(c: _Config) -> _Build:
    """Jamba: attention at ``i % attn_layer_period == attn_layer_offset`` (else Mamba-1), MoE at
    ``i % expert_layer_period == expert_layer_offset`` (else a dense MLP)."""
    b, n = _common(c, {("mamba", "dense"): "m", ("mamba", "moe"): "M",
                       ("attention", "dense"): "a", ("attention", "moe"): "A"})
    ap, ao = c.integer("attn_layer_period", 8), c.integer("attn_layer_offset", 4, minimum=0)
    ep, eo = c.integer("expert_layer_period", 2), c.integer("expert_layer_offset", 1, minimum=0)
    experts = c.integer("num_experts", 16)
    h = b.hidden
    dt_rank = c.data.get("mamba_dt_rank", "auto")
    if dt_rank == "auto":
        dt_rank = -(-h // 16)
    else:
        dt_rank = c.integer("mamba_dt_rank")
    b.mixers["mamba"] = {"type": "mamba", "d_inner": c.integer("mamba_expand", 2) * h,
                         "d_state": c.integer("mamba_d_state", 16), "d_conv": c.integer("mamba_d_conv", 4),
                         "dt_rank": dt_rank}
    b.mixers["attention"] = _attention(c)
    is_attn = [i % ap == ao for i in range(n)]
    is_moe = [experts > 1 and i % ep == eo for i in range(n)]
    if any(is_moe):
        b.ffns["moe"] = _moe(experts, c.integer("num_experts_per_tok", 2), c.integer("intermediate_size"),
                             where=c, top_k_key="num_experts_per_tok")
    if not all(is_moe):
        b.ffns["dense"] = {"type": "dense", "intermediate_size": c.integer("intermediate_size")}
    b.layers = [("attention" if a else "mamba", "moe" if m else "dense") for a, m in zip(is_attn, is_moe)]
    return b


def _gpt_oss(c: _Config) -> _Build:
    """gpt-oss: GQA with biases and sinks, sliding window on even layers, biased experts and router."""
    b, n = _common(c, {("sliding", "moe"): "S", ("attention", "moe"): "F"})
    sliding = _sliding_types(c, n, lambda i: i % 2 == 0)
    mixers = _attention_layers(b, c, sliding, sinks=True, bias_default=True)
    top_k_key = "num_experts_per_tok" if "num_experts_per_tok" in c.data else "experts_per_token"
    b.ffns["moe"] = _moe(c.integer("num_local_experts"), c.integer(top_k_key), c.integer("intermediate_size"),
                         where=c, top_k_key=top_k_key, expert_bias=True, router_bias=True)
    b.layers = [(m, "moe") for m in mixers]
    return b


_READERS: dict[str, Callable[[_Config], _Build]] = {
    "DeepseekV3ForCausalLM": _deepseek_v3,
    "KimiLinearForCausalLM": _kimi_linear,
    "Qwen3NextForCausalLM": _qwen3_next,
    "Qwen3MoeForCausalLM": _qwen3_moe,
    "LlamaForCausalLM": _llama,
    "MiniMaxText01ForCausalLM": _minimax,
    "MiniMaxForCausalLM": _minimax,
    "JambaForCausalLM": _jamba,
    "GptOssForCausalLM": _gpt_oss,
}
_MODEL_TYPES = {
    "deepseek_v3": "DeepseekV3ForCausalLM", "kimi_k2": "DeepseekV3ForCausalLM",
    "kimi_linear": "KimiLinearForCausalLM", "qwen3_next": "Qwen3NextForCausalLM",
    "qwen3_moe": "Qwen3MoeForCausalLM", "llama": "LlamaForCausalLM",
    "minimax_text_01": "MiniMaxText01ForCausalLM", "minimax": "MiniMaxForCausalLM",
    "jamba": "JambaForCausalLM", "gpt_oss": "GptOssForCausalLM",
}
SUPPORTED_ARCHITECTURES = tuple(_READERS)


def _architecture(c: _Config) -> str:
    archs = c.data.get("architectures")
    if archs is not None:
        if not isinstance(archs, list) or not archs or not isinstance(archs[0], str):
            raise c.fail("architectures", "expected a non-empty list of class names")
        if archs[0] not in _READERS:
            raise c.fail("architectures", f"unsupported architecture {archs[0]!r} "
                                          f"(supported: {', '.join(SUPPORTED_ARCHITECTURES)})")
        return archs[0]
    model_type = c.data.get("model_type")
    if model_type is None:
        raise c.fail("architectures", "missing, and no model_type to fall back on")
    if not isinstance(model_type, str) or model_type not in _MODEL_TYPES:
        raise c.fail("model_type", f"unsupported model type {model_type!r} "
                                   f"(supported: {', '.join(sorted(_MODEL_TYPES))})")
    return _MODEL_TYPES[model_type]


def _weight_bits(c: _Config) -> int | None:
    """The checkpoint's weight precision, when the config states it plainly."""
    q = c.data.get("quantization_config")
    if isinstance(q, dict):
        return {"fp8": 8, "mxfp4": 4}.get(q.get("quant_method"))
    dtype = c.data.get("torch_dtype", c.data.get("dtype"))
    return {"bfloat16": 16, "float16": 16, "float32": 32}.get(dtype) if isinstance(dtype, str) else None


def _name(c: _Config) -> str:
    raw = c.data.get("_name_or_path")
    name = ""
    if isinstance(raw, str) and raw.strip("/"):
        name = raw.rstrip("/").rsplit("/", 1)[-1]
    if not name:
        path = Path(c.source)
        name = path.parent.name if path.stem == "config" and path.parent.name else path.stem
    name = re.sub(r"[^A-Za-z0-9._+-]+", "-", name).strip("-")[:200]
    return name or "model"


def spec_from_hf_config(config: dict, source: str) -> dict:
    """A compact-form model spec (see :class:`placer.model.ModelSpec`) from a Hugging Face ``config.json``.

    ``source`` names the file in errors. Raises :class:`InvalidSpec` for an unsupported architecture
    or a missing or ill-typed key (the field names the key, dotted for nested ones).
    """
    if not isinstance(config, dict):
        raise InvalidSpec(source, "-", "expected a JSON object")
    c = _Config(config, source)
    arch = _architecture(c)
    b = _READERS[arch](c)
    letters = [b.letters[x] for x in b.layers]
    used = dict.fromkeys(letters)  # first-appearance order
    inverse = {v: k for k, v in b.letters.items()}
    spec: dict = {
        "name": _name(c),
        "description": f"imported from a Hugging Face config.json ({arch})",
        "source": source,
        "architecture": arch,
    }
    if b.notes:
        spec["notes"] = "; ".join(b.notes)
    mixers_used = dict.fromkeys(inverse[x][0] for x in used)
    ffns_used = dict.fromkeys(inverse[x][1] for x in used if inverse[x][1] is not None)
    spec.update({
        "hidden_size": b.hidden,
        "vocab_size": b.vocab,
        "tie_word_embeddings": b.tie,
        "num_layers": len(letters),
        "pattern": compress_pattern(letters),
        "mixers": {k: b.mixers[k] for k in mixers_used},
        "ffns": {k: b.ffns[k] for k in ffns_used},
        "layer_types": {x: {"mixer": inverse[x][0], "ffn": inverse[x][1]} for x in used},
    })
    window = config.get("max_position_embeddings")
    if isinstance(window, int) and not isinstance(window, bool) and window > 0:
        spec["max_position_embeddings"] = window
    bits = _weight_bits(c)
    if bits is not None:
        spec["default_workload"] = {"weight_bits": bits}
    return spec


# ----------------------------------------------------------------------------- readable patterns
def _runs(seq: list[str]) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for x in seq:
        if out and out[-1][0] == x:
            out[-1] = (x, out[-1][1] + 1)
        else:
            out.append((x, 1))
    return out


def _letters(seq: list[str], min_run: int) -> list[str]:
    """Run-length tokens: runs of at least ``min_run`` as ``X*n``, shorter runs spelled out and joined."""
    tokens: list[str] = []
    plain = ""
    for x, n in _runs(seq):
        if n >= min_run:
            if plain:
                tokens.append(plain)
                plain = ""
            tokens.append(f"{x}*{n}")
        else:
            plain += x * n
    if plain:
        tokens.append(plain)
    return tokens


def _best_period(seq: list[str]) -> tuple[int, int, int] | None:
    """(period, start, repeats) of the most readable repeated block, or None.

    The period is the shift under which the sequence agrees with itself most often. Among the
    phases of that period, a block covering the whole sequence wins; otherwise one whose last
    letter is its rarest (so "3 linear, then 1 attention" reads as ``(KKKM)``), then the longest run.
    """
    n = len(seq)
    best_p, best_matches = 0, 0
    for p in range(2, min(64, n // 2) + 1):
        matches = sum(seq[i] == seq[i + p] for i in range(n - p))
        if matches > best_matches:
            best_p, best_matches = p, matches
    if not best_p:
        return None
    p = best_p
    candidates = []
    for phase in range(p):
        start = phase
        while start + 2 * p <= n:
            block = seq[start:start + p]
            reps = 1
            while start + (reps + 1) * p <= n and seq[start + reps * p:start + (reps + 1) * p] == block:
                reps += 1
            if reps >= 2:
                counts = Counter(block)
                rarest_last = counts[block[-1]] == min(counts.values()) and len(counts) > 1
                whole = start == 0 and reps * p == n
                candidates.append(((whole, rarest_last, reps, -start), (p, start, reps)))
            start += reps * p
    if not candidates:
        return None
    return max(candidates)[1]


def compress_pattern(seq: list[str]) -> str:
    """A readable pattern string that :func:`placer.model.parse_pattern` expands back to ``seq``.

    >>> compress_pattern(list("DDD" + "E" * 58))
    'D*3 E*58'
    >>> compress_pattern(list("D" + "KKM" + "KKKM" * 5 + "KKM"))
    'DKKM (KKKM)*5 KKM'
    """
    if not seq:
        return ""
    if len(_runs(seq)) <= 8:
        return " ".join(_letters(seq, 3))
    found = _best_period(seq)
    if found is None:
        return " ".join(_letters(seq, 3))
    p, start, reps = found
    block = " ".join(_letters(seq[start:start + p], 4))
    parts = [compress_pattern(seq[:start]), f"({block})*{reps}", compress_pattern(seq[start + p * reps:])]
    return " ".join(x for x in parts if x)


# ----------------------------------------------------------------------------- import-hf
def spec_to_yaml(spec: dict, header: str = "") -> str:
    """The spec as YAML: top-level keys in schema order, each mixer / FFN / layer type on one line."""
    body = yaml.safe_dump(spec, sort_keys=False, default_flow_style=None, width=110, allow_unicode=True)
    return header + body


def import_hf(config_path: str | Path, output: str | Path | None = None) -> str:
    """Read a ``config.json``, build and check the model, and return its YAML spec.

    With ``output`` the YAML is also written there atomically; nothing is written when the
    config is invalid.
    """
    from .model import model_from_dict  # model imports this module lazily; keep the cycle one-way

    data, _ = load_yaml_or_json(config_path)
    spec = spec_from_hf_config(data, source=str(config_path))
    model = model_from_dict(spec, source=str(config_path))
    header = (f"# Generated by `placer import-hf {Path(config_path).name}` from a Hugging Face config.json\n"
              f"# ({spec['architecture']}). {model.num_hidden_layers} decoder layers, "
              f"{model.total_params:,} parameters including embedding and head.\n")
    if "default_workload" in spec:
        header += "# default_workload.weight_bits follows the checkpoint's dtype / quantization_config.\n"
    text = spec_to_yaml(spec, header)
    if output is not None:
        atomic_write_text(output, text)
    return text
