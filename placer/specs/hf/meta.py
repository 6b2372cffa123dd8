"""A family the interpreter does not list, read from transformers' own module tree on the meta device.

With the optional extra ``placer[hf]`` (transformers and torch), the config is built into the model
class transformers registers for its ``model_type`` on the ``meta`` device: no weights are
allocated and nothing is downloaded. Parameters are counted per decoder layer from the module
tree; KV cache and state per layer come from the config fields the attention modules use
(``layer_types``, heads, KV heads, head_dim, ``kv_lora_rank``, ``sliding_window``); a layer whose
cache the fields cannot establish is refused, naming the missing field. Without the extra the
refusal names the family and says that ``placer[hf]`` would read it.
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import re

from placer.specs.errors import InvalidSpec
from placer.specs.hf.config import Config

__all__ = ["spec_from_module_tree", "meta_available"]


def meta_available() -> bool:
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


def _refuse(top: Config, text: Config, arch, model_type, reason: str) -> InvalidSpec:
    from placer.specs.hf.quirks import FAMILIES
    listed = ", ".join(sorted({t for f in FAMILIES for t in f.model_types}))
    key = "model_type" if model_type else "architectures"
    return InvalidSpec(top.source, text.key(key),
                       f"family {model_type or arch!r} is not one the interpreter lists ({listed}); {reason}")


def _registered_type(model_type: str, archs) -> str | None:
    """The model type transformers registers for ``model_type``, or, for a type it does not know
    (SGLang's ``deepseek_ref`` re-releases of DeepSeek-V4), the type whose causal-LM class is
    ``architectures[0]``; None when neither names one."""
    from transformers import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    if model_type in CONFIG_MAPPING:
        return model_type
    if not (isinstance(archs, list) and archs and isinstance(archs[0], str)):
        return None
    types = [t for t, cls in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items() if cls == archs[0] and t in CONFIG_MAPPING]
    named = [t for t in types if archs[0].lower().startswith(t.replace("_", "").replace("-", ""))]
    return (named or types or [None])[0]


def _build(text: Config, model_type: str, top: Config | None = None):
    """(transformers config, module tree on the meta device) of the text model; a text config no
    auto class builds (Step-3.7's) is built inside the wrapper class ``architectures[0]`` names."""
    import torch
    import transformers
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

    resolved = _registered_type(model_type, text.data.get("architectures") or (top.data.get("architectures")
                                                                              if top is not None else None))
    if resolved is None:
        raise ValueError(f"transformers {transformers.__version__} registers no model type {model_type!r} "
                         "and no causal-LM class of the config's architectures")
    data = {k: v for k, v in text.data.items() if k not in ("quantization_config", "auto_map", "architectures")}
    cfg = AutoConfig.for_model(resolved, **{k: v for k, v in data.items() if k != "model_type"})
    transformers.logging.set_verbosity_error()
    with torch.device("meta"), contextlib.redirect_stderr(io.StringIO()):
        try:
            return cfg, AutoModelForCausalLM.from_config(cfg)
        except ValueError:
            pass
        try:
            return cfg, AutoModel.from_config(cfg)
        except ValueError:
            wrapper = _wrapper_class(top) if top is not None and top is not text else None
            if wrapper is None:
                raise
            from transformers import CONFIG_MAPPING
            full = {k: v for k, v in top.data.items() if k not in ("quantization_config", "auto_map")}
            return cfg, wrapper._from_config(CONFIG_MAPPING[top.data["model_type"]].from_dict(full))


def _wrapper_class(top: Config):
    import transformers
    from transformers import CONFIG_MAPPING

    archs, mt = top.data.get("architectures"), top.data.get("model_type")
    if not (isinstance(archs, list) and archs and isinstance(archs[0], str)) or mt not in CONFIG_MAPPING:
        return None
    return getattr(transformers, archs[0], None)


def _decoder_layers(model, n: int):
    import torch.nn as nn
    best = None
    for name, mod in model.named_modules():
        if isinstance(mod, nn.ModuleList) and len(mod) == n and "vision" not in name and "visual" not in name:
            if best is None or len(name) < len(best[0]):
                best = (name, mod)
    return best


def spec_from_module_tree(top: Config, text: Config, arch, model_type, sibling, sibling_source) -> dict:
    """An explicit-form spec (one entry per decoder layer) counted from the meta-device module tree."""
    if not meta_available():
        raise _refuse(top, text, arch, model_type,
                      "the optional extra placer[hf] (transformers + torch) would read it from transformers' "
                      "module tree on the meta device: pip install 'placer[hf]'")
    if not isinstance(model_type, str):
        raise _refuse(top, text, arch, model_type, "and the config names no model_type to build")
    logging.getLogger("transformers").setLevel(logging.ERROR)
    try:
        cfg, model = _build(text, model_type, top)
    except Exception as exc:   # transformers raises many kinds; any of them means it cannot build this config
        raise _refuse(top, text, arch, model_type,
                      f"transformers cannot build it on the meta device ({type(exc).__name__}: "
                      f"{str(exc).splitlines()[0][:160] if str(exc) else ''})") from None
    n = _cfg(cfg, "num_hidden_layers")
    if not isinstance(n, int) or n < 1:
        raise text.fail("num_hidden_layers", "required to find the decoder layers in the module tree")
    found = _decoder_layers(model, n)
    if found is None:
        raise text.fail("num_hidden_layers", f"no list of {n} decoder layers in {type(model).__name__}'s module tree")
    layers_name, layers = found
    per_layer = [sum(p.numel() for p in layer.parameters()) for layer in layers]
    seen = {id(p) for layer in layers for p in layer.parameters()}
    tower = sum(p.numel() for name, p in model.named_parameters()
                if id(p) not in seen and any(k in name for k in _TOWER_WORDS))
    seen |= {id(p) for name, p in model.named_parameters() if any(k in name for k in _TOWER_WORDS)}
    emb = model.get_input_embeddings()
    emb_params = sum(p.numel() for p in emb.parameters()) if emb is not None else 0
    seen |= {id(p) for p in emb.parameters()} if emb is not None else set()
    rest = sum(p.numel() for p in model.parameters() if id(p) not in seen)
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    untied = text.data.get("tie_word_embeddings") is False
    if head is not None and emb is not None and head.weight is emb.weight and untied:
        # built from the text config alone the head came out tied; the checkpoint's config says it is not
        rest += head.weight.numel()
    elif head is None and emb is not None and untied:
        # no causal-LM class for this text config: the bare text model, whose wrapper adds the head
        rest += emb.weight.numel()
    h = _cfg(cfg, "hidden_size")
    kv = [_kv_of(cfg, text, i, layers[i]) for i in range(n)]
    entries = [{"kind": "vision", "name": "vision_tower", "params": int(tower)}] if tower else []
    emb_tensors = _tensors(("embed_tokens." + k, p) for k, p in emb.named_parameters()) if emb is not None else {}
    vocab = emb.weight.shape[0] if emb is not None and getattr(emb, "weight", None) is not None else None
    entries.append(_with_tensors({"kind": "embedding", "name": "embedding", "params": int(emb_params)},
                                 emb_tensors, vocab))
    for i, (p, (kind, kv_el, window, state)) in enumerate(zip(per_layer, kv)):
        e = {"kind": kind, "name": f"layers.{i}", "params": int(p), "tensors": _tensors(layers[i].named_parameters())}
        heads = _heads(layers[i])
        if heads:
            e["heads"] = list(heads)
        if any(len(shape) == 3 and "experts" in name.split(".") for name, shape in e["tensors"].items()):
            e["ffn"] = "moe"                # routed experts, stacked (E, out, in)
        if kv_el:
            e["kv_elements_per_token"] = kv_el
        if window:
            e["kv_window"] = window
        if state:
            e["state_elements_per_request"] = state
        entries.append(e)
    entries.append(_with_tensors({"kind": "lm_head", "name": "lm_head", "params": int(rest)},
                                 _head_tensors(model, seen, head, emb, untied), vocab))
    spec = {"hidden_size": h, "layers": entries,
            "notes": f"parameters counted from transformers' {type(model).__name__} on the meta device "
                     f"({layers_name}); KV and state from the config fields"}
    mp = _cfg(cfg, "max_position_embeddings")
    spec["workload_notes"] = ("imported workload defaults: "
                              + (f"context {mp:,} tokens (the config's max_position_embeddings), "
                                 if isinstance(mp, int) and mp > 0 else "")
                              + "concurrency 1 (placer's default); --context / --concurrency override")
    if isinstance(mp, int) and 0 < mp <= 2**40:
        spec["default_workload"] = {"context": mp}
    return spec


_TOWER_WORDS = ("vision", "visual", "mm_projector", "multi_modal_projector", "audio", "embed_vision")
_EXPERT_INDEX = re.compile(r"(^|\.)experts\.(\d+)\.")


def _tensors(named) -> dict[str, list[int]]:
    """Name -> shape of each parameter; experts stored one module each (``experts.<e>.``) are
    written as one stacked tensor (``experts.``, shape ``(E, ...)``) when every expert's is alike."""
    out: dict[str, list[int]] = {}
    stacks: dict[str, list] = {}
    for name, p in named:
        shape = [int(x) for x in p.shape] or [1]
        m = _EXPERT_INDEX.search(name)
        if m:
            stacks.setdefault(_EXPERT_INDEX.sub(r"\1experts.", name, count=1), []).append((int(m.group(2)), shape, name))
        else:
            out[name] = shape
    for name, items in stacks.items():
        shapes = {tuple(s) for _, s, _ in items}
        if len(shapes) == 1 and sorted(e for e, _, _ in items) == list(range(len(items))):
            out[name] = [len(items), *items[0][1]]
        else:
            out.update({full: s for _, s, full in items})
    return out


def _with_tensors(entry: dict, tensors: dict, vocab) -> dict:
    """``entry`` with its tensors and vocabulary, when they account for its parameters."""
    if tensors and sum(math.prod(s) for s in tensors.values()) == entry["params"]:
        entry["tensors"] = tensors
        if isinstance(vocab, int) and vocab > 0:
            entry["vocab_size"] = vocab
    return entry



def _head_tensors(model, seen: set, head, emb, untied: bool) -> dict:
    """The LM-head node's tensors: every parameter outside the layers, the embedding and the towers
    (the final norm, the head itself), with the untied head a text model's wrapper would add."""
    rest = _tensors((name, p) for name, p in model.named_parameters() if id(p) not in seen)
    if head is not None and emb is not None and head.weight is emb.weight and untied:
        rest["lm_head.weight"] = [int(x) for x in head.weight.shape]
    elif head is None and emb is not None and untied:
        rest["lm_head.weight"] = [int(x) for x in emb.weight.shape]
    return rest


def _heads(layer) -> tuple[int, int] | None:
    """(query heads, KV heads) of the layer's attention module, from its projections and head size."""
    import torch.nn as nn
    for _, mod in layer.named_modules():
        q, k = getattr(mod, "q_proj", None), getattr(mod, "k_proj", None)
        d = getattr(mod, "head_dim", None)
        if isinstance(q, nn.Linear) and isinstance(k, nn.Linear) and isinstance(d, int) and d > 0:
            if k.out_features % d:
                return None
            nkv = k.out_features // d
            groups = getattr(mod, "num_key_value_groups", None)
            nq = nkv * groups if isinstance(groups, int) and groups > 0 else q.out_features // d
            return (nq, nkv) if nq > 0 and nkv > 0 else None
    return None


def _cfg(cfg, name: str):
    try:
        return getattr(cfg, name, None)
    except Exception:    # a per-layer attribute some configs refuse to give globally
        return None


def _kv_from_module(layer) -> int | None:
    """K plus V elements per token from the layer's attention projections, when it has them."""
    import torch.nn as nn
    for _, mod in layer.named_modules():
        k = getattr(mod, "k_proj", None)
        if isinstance(k, nn.Linear):
            v = getattr(mod, "v_proj", None)
            # with no v_proj the keys serve as values, and the cache still holds both
            return k.out_features + (v.out_features if isinstance(v, nn.Linear) else k.out_features)
    return None


def _kv_of(cfg, text: Config, i: int, layer) -> tuple[str, int, int | None, int]:
    """(kind, KV elements per token, window, state elements per request) of layer ``i``."""
    types = _cfg(cfg, "layer_types")
    t = types[i] if isinstance(types, (list, tuple)) and len(types) > i else "full_attention"
    if t in ("linear_attention", "mamba", "mamba2", "conv", "recurrent"):
        raise text.fail("layer_types", f"layer {i} is {t!r}: its state per request cannot be established from "
                                       "the config fields (the interpreter would need this family)")
    if _cfg(cfg, "kv_lora_rank"):
        return "attention", int(cfg.kv_lora_rank) + int(_cfg(cfg, "qk_rope_head_dim") or 0), None, 0
    from_module = _kv_from_module(layer)
    nq = _cfg(cfg, "num_attention_heads")
    if from_module is None and (not isinstance(nq, int) or nq < 1):
        raise text.fail("num_attention_heads", "required for the KV cache per token")
    if from_module is None:
        nkv = next((_cfg(cfg, k) for k in ("num_key_value_heads", "num_kv_heads", "n_head_kv",
                                           "multi_query_group_num") if _cfg(cfg, k)), nq)
        d = _cfg(cfg, "head_dim") or (cfg.hidden_size // nq)
        from_module = 2 * int(nkv) * int(d)
    window = None
    if t in ("sliding_attention", "chunked_attention"):
        window = _cfg(cfg, "sliding_window") if t == "sliding_attention" else _cfg(cfg, "attention_chunk_size")
        if not isinstance(window, int) or window < 1:
            raise text.fail("sliding_window" if t == "sliding_attention" else "attention_chunk_size",
                            f"layer {i} is {t!r} but the window size is missing")
    return "attention", int(from_module), window, 0


def tower_params(top: Config) -> int | None:
    """Parameters of a multimodal wrapper's non-text towers (vision / audio encoders and their
    projectors), counted on the meta device from the class ``architectures[0]`` names, or None when
    the extra is missing or transformers cannot build the wrapper."""
    if not meta_available():
        return None
    archs = top.data.get("architectures")
    model_type = top.data.get("model_type")
    if not (isinstance(archs, list) and archs and isinstance(archs[0], str) and isinstance(model_type, str)):
        return None
    try:
        import torch
        import transformers
        from transformers import CONFIG_MAPPING

        if model_type not in CONFIG_MAPPING or not hasattr(transformers, archs[0]):
            return None
        data = {k: v for k, v in top.data.items() if k not in ("quantization_config", "auto_map")}
        cfg = CONFIG_MAPPING[model_type].from_dict(data)
        transformers.logging.set_verbosity_error()
        with torch.device("meta"), contextlib.redirect_stderr(io.StringIO()):
            full = getattr(transformers, archs[0])._from_config(cfg)
        text = {id(p) for p in full.get_decoder().parameters()}
        head = full.get_output_embeddings()
        if head is not None:
            text |= {id(p) for p in head.parameters()}
        return sum(p.numel() for p in full.parameters() if id(p) not in text)
    except Exception:   # any failure to build means no exact count; the caller falls back to the formula
        return None
