"""Hugging Face ``config.json`` -> a compact-form model spec (the same schema as ``models/*.yaml``).

* :mod:`.interpret`: one interpreter of the keys decoder configs share (every family it lists);
* :mod:`.quirks`: the one table of what a family does differently;
* :mod:`.quantization`: the checkpoint's stored formats (``quantization_config``, a sibling
  ``hf_quant_config.json``) and which tensors each holds;
* :mod:`.meta`: a family the interpreter does not list, read from transformers' module tree on the
  meta device (needs the optional extra ``placer[hf]``);
* :mod:`.vision`: a vision/audio tower's parameters from its config.

Multimodal wrappers (``text_config`` / ``language_config`` / ``llm_config``) are unwrapped; the
tower becomes its own node. Multi-token-prediction layers are recorded as an optional node
(``--mtp``). Nothing here imports :mod:`placer.specs.model`: a spec is a plain mapping.
"""

from __future__ import annotations

import json
import re
from glob import escape as glob_escape
from pathlib import Path

import yaml

from placer.specs.errors import InvalidSpec
from placer.specs.hf.config import Config, load_config_json
from placer.specs.hf.interpret import Interpretation, LayerPlan, interpret
from placer.specs.hf.pattern import compress_pattern
from placer.specs.hf.quantization import (
    Quantization,
    dtype_bits,
    index_modules,
    read_kv_cache_format,
    read_quantization,
)
from placer.specs.hf.quirks import FAMILIES, Family, family_of
from placer.specs.hf.vision import vision_params
from placer.specs.layers import ffn_tensors, mixer_tensors

__all__ = ["spec_from_hf_config", "spec_from_hf_file", "load_config_json", "compress_pattern", "spec_to_yaml", "SUPPORTED_FAMILIES",
           "unwrap"]

SUPPORTED_FAMILIES = tuple(t for f in FAMILIES for t in f.model_types)
_WRAPPERS = ("text_config", "language_config", "llm_config")
_TOWERS = ("vision_config", "vision_tower_config", "audio_config", "vision_tower", "visual")


def unwrap(c: Config) -> tuple[Config, list[tuple[str, dict]]]:
    """(the text model's config, [(key, tower config)]) of a possibly multimodal config."""
    text = c
    for key in _WRAPPERS:
        if isinstance(c.data.get(key), dict):
            text = c.section(key)
            if text.data.get("tie_word_embeddings") is None and isinstance(c.data.get("tie_word_embeddings"), bool):
                # the wrapper's flag is the one its model class reads
                text = Config({**text.data, "tie_word_embeddings": c.data["tie_word_embeddings"]}, c.source, text.prefix)
            break
    towers = [(k, c.data[k]) for k in _TOWERS if isinstance(c.data.get(k), dict)]
    return text, towers


def _architecture(c: Config) -> str | None:
    archs = c.data.get("architectures")
    if archs is None:
        return None
    if not isinstance(archs, list) or not archs or not all(isinstance(a, str) for a in archs):
        raise c.fail("architectures", "expected a non-empty list of class names")
    return archs[0]


def _name(top: Config) -> str:
    raw = top.data.get("_name_or_path")
    name = ""
    if isinstance(raw, str) and raw.strip("/"):
        name = raw.rstrip("/").rsplit("/", 1)[-1]
    if not name:
        path = Path(top.source)
        name = path.parent.name if path.stem == "config" and path.parent.name else path.stem
    name = re.sub(r"[^A-Za-z0-9._+-]+", "-", name).strip("-")[:200]
    return name or "model"


# ----------------------------------------------------------------------------- naming for quantization
def _module_names(tensor_name: str, index: int | None, fam: Family, wrapped: bool) -> list[str]:
    """Candidate checkpoint names of the module holding ``tensor_name`` in decoder layer ``index``."""
    module = tensor_name.rsplit(".", 1)[0] if tensor_name.endswith((".weight", ".bias")) else tensor_name
    module = module.replace("experts.", "experts.0.", 1) if ".experts." in f".{module}" else module
    for old, new in fam.names:
        module = module.replace(old, new)
    base = f"model.layers.{index}.{module}" if index is not None else module
    names = [base]
    if wrapped:
        names += [f"language_model.{base}", f"model.language_model.{base.removeprefix('model.')}"]
    return names


def _storage(q: Quantization | None, plan: LayerPlan, h: int, index: int, fam: Family, wrapped: bool) -> dict:
    """Format name -> the layer's linear tensors stored in it (those not at the checkpoint dtype)."""
    if q is None:
        return {}
    tensors = (mixer_tensors(plan.mixer, h) if plan.mixer else []) + ffn_tensors(plan.ffn, h)
    fmt = {t.name: q.format_of(_module_names(t.name, index, fam, wrapped), expert=t.role == "experts")
           for t in tensors if t.linear}
    # a module whose linear weights share one format is written as ``module.*``
    by_prefix: dict[str, set[str]] = {}
    for name, f in fmt.items():
        by_prefix.setdefault(_prefix(name), set()).add(f)
    out: dict[str, list[str]] = {}
    for name, f in fmt.items():
        if f == q.dtype:
            continue
        p = _prefix(name)
        entry = f"{p}.*" if p != "mlp" and len(by_prefix[p]) == 1 else name
        if entry not in out.get(f, []):
            out.setdefault(f, []).append(entry)
    return out


def _prefix(tensor_name: str) -> str:
    parts = tensor_name.split(".")
    if parts[0] == "mlp" and len(parts) > 2 and parts[1] in ("experts", "shared_experts"):
        return f"mlp.{parts[1]}"
    return parts[0]


# ----------------------------------------------------------------------------- assembling the spec
_LETTERS = {"gqa": "A", "mla": "A", "sliding": "S", "kda": "K", "gated_deltanet": "G", "lightning": "L",
            "mamba": "M", "mamba2": "M", None: "F"}


def _mixer_key(m: dict | None) -> str | None:
    if m is None:
        return None
    return "sliding" if m["type"] in ("gqa", "mha") and m.get("sliding_window") else m["type"]


def _assemble(interp: Interpretation, q: Quantization | None, fam: Family, wrapped: bool) -> dict:
    h = interp.hidden
    mixers: dict[str, dict] = {}
    ffns: dict[str, dict] = {}
    types: dict[str, dict] = {}
    by_sig: dict[str, str] = {}
    used_letters: set[str] = set()

    def named(table: dict, base: str, spec: dict) -> str:
        for k, v in table.items():
            if v == spec:
                return k
        name = base
        n = 2
        while name in table:
            name = f"{base}_{n}"
            n += 1
        table[name] = spec
        return name

    def letter_for(plan: LayerPlan, storage: dict) -> str:
        sig = json.dumps([plan.mixer, plan.ffn, storage], sort_keys=True)
        if sig in by_sig:
            return by_sig[sig]
        base = _LETTERS[_mixer_key(plan.mixer)]
        if plan.mixer is None:
            base = "E" if plan.ffn and plan.ffn["type"] == "moe" else "F"
        elif plan.ffn is not None and plan.ffn["type"] == "dense" and any(
                p.ffn and p.ffn["type"] == "moe" for p in interp.layers):
            base = base.lower()
        candidates = [base, base.swapcase()] + [x for x in "BCDHIJNOPQRTUVWXYZ" + "bcdhijnopqrtuvwxyz"]
        letter = next(x for x in candidates if x not in used_letters)
        used_letters.add(letter)
        by_sig[sig] = letter
        entry = {"mixer": named(mixers, _mixer_key(plan.mixer), plan.mixer) if plan.mixer else None}
        if plan.ffn is not None:
            entry["ffn"] = named(ffns, plan.ffn["type"], plan.ffn)
        if entry["mixer"] is None:
            del entry["mixer"]
        if storage:
            entry["storage"] = storage
        types[letter] = entry
        return letter

    letters = []
    for i, plan in enumerate(interp.layers):
        letters.append(letter_for(plan, _storage(q, plan, h, i, fam, wrapped)))
    spec: dict = {
        "hidden_size": h, "vocab_size": interp.vocab, "tie_word_embeddings": interp.tie,
        "num_layers": len(letters), "pattern": compress_pattern(letters),
    }
    if interp.norms_per_layer is not None:
        spec["norm_params_per_layer"] = interp.norms_per_layer
    if interp.mtp is not None:
        n = len(interp.layers)
        mtp_letter = letter_for(interp.mtp, _storage(q, interp.mtp, h, n, fam, wrapped))
        # the MTP block's own tensors: embedding and hidden norms, the 2h -> h projection, a final norm
        spec["mtp"] = {"count": interp.mtp_count, "layer_type": mtp_letter, "extra_params": 2 * h * h + 3 * h}
    spec.update(mixers=mixers, ffns=ffns, layer_types=types)
    return spec


def _unknown_family(text: Config, arch: str | None, model_type, top: Config, sibling, sibling_source) -> dict:
    from placer.specs.hf import meta
    return meta.spec_from_module_tree(top, text, arch, model_type, sibling, sibling_source)


def spec_from_hf_config(config: dict, source: str, *, sibling: dict | None = None,
                        sibling_source: str | None = None, index: dict | None = None) -> dict:
    """A compact-form model spec (see :class:`placer.specs.model.ModelSpec`) from a Hugging Face ``config.json``.

    ``sibling`` is the parsed ``hf_quant_config.json`` beside it, if any; ``index`` the parsed
    ``model.safetensors.index.json``, whose tensor list says which modules are stored with scales.
    Raises :class:`InvalidSpec` for a family neither the interpreter nor (with ``placer[hf]``) the
    meta-device path can read, or a missing or ill-typed key (named, dotted for nested ones).
    A config that says its checkpoint is quantized while no stored format is read gets a warning
    (``import_warnings``): its weights then count at ``--weight-bits``.
    """
    if not isinstance(config, dict):
        raise InvalidSpec(source, "-", "expected a JSON object")
    top = Config(config, source)
    text, towers = unwrap(top)
    wrapped = text is not top
    arch = _architecture(text) or _architecture(top)
    model_type = text.data.get("model_type") or top.data.get("model_type")
    fam = family_of(model_type if isinstance(model_type, str) else None)
    if fam is None and wrapped:
        fam = family_of(top.data.get("model_type"))
    modules = index_modules(index) if index is not None else None
    said = _says_quantized(top, text, sibling, modules)
    warnings = []
    if fam is None:
        spec = _unknown_family(text, arch, model_type, top, sibling, sibling_source)
        path = "meta"
        if said:
            warnings.append(f"the checkpoint is quantized ({said}) but the meta-device path counts parameters, "
                            "not stored formats: weights count at --weight-bits (16 unless given)")
    else:
        interp = interpret(text, fam)
        interp.dtype_bits = dtype_bits(text, top)
        q = read_quantization(text, top, sibling, sibling_source, modules)
        if q is None and said:
            warnings.append(f"the config says the checkpoint is quantized ({said}) but no stored format could be "
                            "read (no quantization_config, no hf_quant_config.json): weights count at "
                            "--weight-bits (16 unless given)")
        spec = _assemble(interp, q, fam, wrapped)
        spec.update(_storage_section(q, interp, fam, wrapped))
        spec.update(_workload(interp, q))
        path = "interpreter"
    head = {"name": _name(top),
            "description": f"imported from a Hugging Face config.json ({arch or model_type}; read by the "
                           + ("families interpreter" if path == "interpreter" else
                              "transformers module tree on the meta device") + ")",
            "source": source, "architecture": arch or str(model_type)}
    spec = {**head, **spec}
    if warnings:
        spec["import_warnings"] = warnings
    mp = text.data.get("max_position_embeddings")
    if isinstance(mp, int) and not isinstance(mp, bool) and 0 < mp <= 10**18:
        spec["max_position_embeddings"] = mp
    kv = read_kv_cache_format(text, top, sibling, sibling_source)
    if kv is not None:
        bits, said = kv
        spec["kv_cache_format"] = said
        spec["default_workload"] = {**spec.get("default_workload", {}), "kv_bits": bits}
    h = spec["hidden_size"]
    has_tower = any(x.get("kind") == "vision" for x in spec.get("layers") or [])
    for key, tower in ([] if has_tower else towers):
        from placer.specs.hf.meta import tower_params
        exact = tower_params(top)
        if exact:
            spec["vision_tower"] = {"params": exact}
            spec["notes"] = "vision/audio tower counted from transformers' module tree on the meta device"
        else:
            spec["vision_tower"] = {"params": vision_params(Config(tower, source, prefix=f"{key}."), h)}
            spec["notes"] = "vision/audio tower counted from its config by the ViT formula (placer/specs/hf/vision.py)"
        break
    return spec


_QUANT_WORDS = re.compile(r"(?<![A-Za-z0-9])(NVFP4|MXFP4|FP8|FP4|INT4|INT8|AWQ|GPTQ|W4A16|W4A8|W8A8|W8A16|BNB|4bit|8bit)"
                          r"(?![A-Za-z0-9])", re.IGNORECASE)


def _says_quantized(top: Config, text: Config, sibling: dict | None, modules) -> str:
    """What says the checkpoint is quantized (empty when nothing does)."""
    if any(isinstance(c.data.get("quantization_config"), dict) for c in (top, text)):
        return "quantization_config"
    if sibling is not None:
        return "hf_quant_config.json"
    if modules is not None and modules[1]:
        return f"the safetensors index stores scales for {len(modules[1]):,} modules"
    for c in (top, text):
        raw = c.data.get("_name_or_path")
        if isinstance(raw, str):
            hit = _QUANT_WORDS.search(raw.rsplit("/", 1)[-1])
            if hit:
                return f"its name says {hit.group(1)}"
    hit = _QUANT_WORDS.search(Path(top.source).parent.name if Path(top.source).name == "config.json"
                              else Path(top.source).stem)
    return f"its name says {hit.group(1)}" if hit else ""


def _storage_section(q: Quantization | None, interp: Interpretation, fam: Family, wrapped: bool) -> dict:
    if q is None:
        return {}
    lm = q.format_of(["lm_head", "language_model.lm_head"], expert=False, lm_head=True)
    st = {"formats": dict(q.formats), "default": q.dtype}
    if lm != q.dtype:
        st["lm_head"] = lm
    return {"weight_storage": st}


def _workload(interp: Interpretation, q: Quantization | None) -> dict:
    wl: dict = {}
    notes = []
    if interp.max_positions:
        wl["context"] = interp.max_positions
        notes.append(f"context {interp.max_positions:,} tokens (the config's max_position_embeddings)")
    notes.append("concurrency 1 (placer's default; the config does not say)")
    if q is not None:
        notes.append(f"weights as stored ({q.method}; --weight-bits overrides)")
    else:
        wl["weight_bits"] = interp.dtype_bits
    out = {"workload_notes": "imported workload defaults: " + ", ".join(notes) + "; --context / --concurrency override"}
    if wl:
        out["default_workload"] = wl
    return out


def spec_from_hf_file(path: str | Path, data: dict | None = None) -> dict:
    """The spec of the ``config.json`` at ``path``, or of a Hugging Face snapshot directory (its
    ``config.json``); ``data`` is the config's content when already read.

    Beside the config it reads ``hf_quant_config.json`` (``<stem>.hf_quant_config.json`` for a config
    saved under another name); failing that, the one JSON file there whose name says ``quant`` and
    that holds a quantization config (several such files: a warning, none read); and the
    safetensors index (``model.safetensors.index.json``, ``<stem>.safetensors.index.json``), whose
    tensor list decides which modules are stored with scales.
    """
    path = Path(path)
    if path.is_dir() and path.suffix not in (".yaml", ".yml", ".json"):
        if not (path / "config.json").is_file():
            raise InvalidSpec(str(path), "config.json", "a Hugging Face snapshot directory holds a config.json; "
                                                        "there is none here")
        path, data = path / "config.json", None
    data = load_config_json(path) if data is None else data
    snapshot = path.name == "config.json"
    named = [path.parent / "hf_quant_config.json"] if snapshot else []
    named.append(path.with_name(f"{path.stem}.hf_quant_config.json"))
    sibling_path = next((p for p in named if p.is_file() and p != path), None)
    notes = []
    sibling = load_config_json(sibling_path) if sibling_path is not None else None
    if sibling_path is None and not _has_quantization(data):
        sibling_path, sibling, data, notes = _other_quant_file(path, data, snapshot)
    index_path = next((p for p in ([path.parent / "model.safetensors.index.json"] if snapshot else [])
                       + [path.with_name(f"{path.stem}.safetensors.index.json")] if p.is_file()), None)
    index = None
    if index_path is not None:
        index, why = _read_index(index_path)
        if why:
            notes.append(f"{index_path.name} not read ({why}): stored formats follow the configs alone")
    spec = spec_from_hf_config(data, str(path), sibling=sibling, sibling_source=str(sibling_path), index=index)
    if notes:
        spec["import_warnings"] = notes + spec.get("import_warnings", [])
    return spec


_MAX_INDEX_BYTES = 256 * 2**20   # a safetensors index of a trillion-parameter checkpoint is ~10 MB


def _read_index(path: Path) -> tuple[dict | None, str]:
    """(the parsed safetensors index, "") or (None, why it could not be read); its size is beyond a
    spec file's limit, so it is read here with its own."""
    try:
        if path.stat().st_size > _MAX_INDEX_BYTES:
            return None, f"larger than {_MAX_INDEX_BYTES // 2**20} MiB"
        doc = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return None, type(exc).__name__
    if not isinstance(doc, dict) or not isinstance(doc.get("weight_map"), dict):
        return None, "no weight_map"
    return doc, ""


def _has_quantization(data: dict) -> bool:
    return isinstance(data, dict) and any(isinstance(c.get("quantization_config"), dict)
                                          for c in [data] + [data[k] for k in _WRAPPERS if isinstance(data.get(k), dict)])


def _other_quant_file(path: Path, data: dict, snapshot: bool):
    """(path, sibling, config data, warnings) for a quantization file beside the config under another
    name: any ``*quant*.json`` in a snapshot directory, ``<stem>*quant*.json`` beside a renamed config."""
    pattern = "*quant*.json" if snapshot else f"{glob_escape(path.stem)}*quant*.json"
    found = []
    for p in sorted(path.parent.glob(pattern)):
        if p == path or p.name.endswith(".safetensors.index.json") or not p.is_file():
            continue
        try:
            doc = load_config_json(p)
        except InvalidSpec:
            continue
        if isinstance(doc.get("quantization"), dict) or "quant_algo" in doc or "quant_method" in doc:
            found.append((p, doc))
    if not found:
        return None, None, data, []
    if len(found) > 1:
        names = ", ".join(p.name for p, _ in found)
        return None, None, data, [f"several quantization files beside the config ({names}): none read; "
                                  "name the checkpoint's one hf_quant_config.json"]
    p, doc = found[0]
    note = f"quantization read from {p.name} (beside the config under another name)"
    if isinstance(doc.get("quantization"), dict):
        return p, doc, data, [note]
    if "quant_method" not in doc:                      # a bare ModelOpt section
        return p, {"quantization": doc}, data, [note]
    return None, None, {**data, "quantization_config": doc}, [note]


def spec_to_yaml(spec: dict, header: str = "") -> str:
    """The spec as YAML: top-level keys in schema order, each mixer / FFN / layer type on one line."""
    body = yaml.safe_dump(spec, sort_keys=False, default_flow_style=None, width=110, allow_unicode=True)
    return header + body
