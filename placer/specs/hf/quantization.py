"""Quantization as stored: ``quantization_config`` (and a sibling ``hf_quant_config.json``) read into
stored formats, and which tensors each one holds.

Methods read, with what each stores beside the packed weights (see :mod:`placer.specs.precision`):

* ``fp8`` (block): e4m3 weights, one fp32 ``weight_scale_inv`` per ``weight_block_size`` block;
  per-tensor: one fp32 ``weight_scale`` (plus ``input_scale`` when activations are static).
* ``mxfp4`` (gpt-oss): routed experts only, 4-bit blocks of 32 with one uint8 (e8m0) scale each.
* ``compressed-tensors``: each ``config_groups`` entry (targets, ``num_bits``, ``type``, ``strategy``
  group / channel / tensor / block / tensor_group, ``group_size``, ``symmetric``, ``scale_dtype``);
  ``pack-quantized`` int4/int8 stores a 2-int64 ``weight_shape`` per tensor; asymmetric groups store
  packed zero points; ``nvfp4`` adds a global fp32 scale; static input activations an input scale.
* ``modelopt``: NVFP4 (4-bit, fp8 scale per 16, fp32 global and input scales), W4A16_NVFP4 (no
  input scale), FP8 per tensor, per channel (``FP8_PER_CHANNEL_PER_TOKEN``) or in 128 x 128 blocks
  (``FP8_PB_WO`` / ``FP8_BLOCK_SCALES``), MXFP8 (e8m0 scale per 32); ``MIXED_PRECISION`` gives each
  module of ``quantized_layers`` its own algorithm (a module not listed keeps the checkpoint dtype).
* ``awq`` (packed qweight, fp16 scales and packed zeros per group) and ``gptq`` (also one int32
  ``g_idx`` per input column), ``bits`` and ``group_size`` (-1: per output channel).
* ``bitsandbytes``: 4-bit (nf4/fp4) blocks of 64 with fp32 absmax, or 8-bit absmax plus fp32 per
  256 blocks when double-quantized; 8-bit LLM.int8 with one fp32 scale per row.

``ignore`` / ``modules_to_not_convert`` / ``exclude_modules`` / ``llm_int8_skip_modules`` keep the
modules they name at the checkpoint dtype. Routers, norms, biases, convolutions and embeddings are
never quantized; the LM head only when the method converts it and no list excludes it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from placer.specs.hf.config import Config

__all__ = ["Quantization", "read_quantization", "read_kv_cache_format", "dtype_bits", "index_modules"]

_DTYPE_BITS = {"bfloat16": 16, "float16": 16, "half": 16, "float32": 32, "float": 32, "float8_e4m3fn": 8,
               "float8_e5m2": 8, "uint8": 8, "int8": 8, "float8_e8m0fnu": 8}


def dtype_bits(text: Config, top: Config | None = None) -> int:
    """Bits per value of the checkpoint dtype (``torch_dtype`` / ``dtype``; bf16 when absent)."""
    for c in (text, top):
        if c is None:
            continue
        for key in ("torch_dtype", "dtype"):
            v = c.data.get(key)
            if isinstance(v, str) and v.removeprefix("torch.") in _DTYPE_BITS:
                return _DTYPE_BITS[v.removeprefix("torch.")]
    return 16


@dataclass
class _Rule:
    """One quantized format and the modules it applies to."""

    name: str
    fmt: dict
    targets: list[str] | None = None      # None: every linear weight (subject to ignore)
    experts_only: bool = False
    lm_head: bool = False                 # whether the method converts the LM head
    style: str = "ct"                     # how targets match: "ct" (compressed-tensors), "module" (a module and what it holds)


@dataclass
class Quantization:
    """How a checkpoint stores its weights: named formats, and a rule per module name."""

    method: str
    dtype: str
    formats: dict[str, dict]
    rules: list[_Rule]
    ignore: list[str] = field(default_factory=list)
    ignore_style: str = "plain"           # "ct": compressed-tensors (re: prefixes); "plain": names / globs
    notes: list[str] = field(default_factory=list)
    # (every module, the modules stored with scales) from the checkpoint's safetensors index: where it
    # names a module, it says whether that module is quantized, whatever the ignore lists say
    index: tuple[frozenset, frozenset] | None = None

    def _ignored(self, names: list[str]) -> bool:
        for pat in self.ignore:
            for name in names:
                if _matches(pat, name, self.ignore_style):
                    return True
        return False

    def format_of(self, names: list[str], *, expert: bool, lm_head: bool = False) -> str:
        """The format name of the linear module known by ``names`` (its candidate full names)."""
        listed = [n for n in names if self.index is not None and n in self.index[0]]
        if listed:
            if not any(n in self.index[1] for n in listed):
                return self.dtype                 # stored without scales: at the checkpoint dtype
            found = self._rule(names, expert, lm_head)
            if found != self.dtype:
                return found
            # stored with scales though the ignore lists keep it: the method's first format that applies
            return next((r.name for r in self.rules if expert or not r.experts_only), self.dtype)
        if self._ignored(names):
            return self.dtype
        return self._rule(names, expert, lm_head)

    def _rule(self, names: list[str], expert: bool, lm_head: bool) -> str:
        for r in self.rules:
            if r.experts_only and not expert:
                continue
            if lm_head and not r.lm_head:
                continue
            if r.targets is None or any(_matches(t, n, r.style) for t in r.targets for n in names):
                return r.name
        return self.dtype


def _matches(pattern: str, name: str, style: str) -> bool:
    if style == "module":
        return name == pattern or name.startswith(pattern + ".")
    if pattern == "Linear":
        return True
    if pattern.startswith("re:"):
        try:
            return re.match(pattern[3:], name) is not None
        except re.error:
            return False
    if style == "ct" and not any(ch in pattern for ch in "*?["):
        return name == pattern or name.endswith("." + pattern)
    if any(ch in pattern for ch in "*?["):
        return fnmatchcase(name, pattern) or fnmatchcase(name, pattern + ".*") or fnmatchcase(name, "*." + pattern) \
            or fnmatchcase(name, "*." + pattern + ".*")
    return (name == pattern or name.startswith(pattern + ".") or name.endswith("." + pattern)
            or f".{pattern}." in f".{name}.")


def _bits_of(c: Config, key: str, default: int) -> int:
    v = c.data.get(key)
    if isinstance(v, str):
        name = v.removeprefix("torch.")
        if name not in _DTYPE_BITS:
            raise c.fail(key, f"unknown dtype {v!r}")
        return _DTYPE_BITS[name]
    return default


def _ct_format(w: Config, dtype: int) -> dict:
    """A compressed-tensors ``weights`` scheme as a stored format."""
    bits = w.integer("num_bits")
    kind = w.text("type", "int")
    strategy = w.text("strategy", "tensor")
    scale = _bits_of(w, "scale_dtype", 8 if kind == "float" and bits == 4 else (32 if kind == "float" else dtype))
    sym = w.flag("symmetric", True)
    fmt: dict = {"bits": bits}
    zero = 0 if sym else (_bits_of(w, "zp_dtype", bits) if kind == "int" else 0)
    if strategy in ("group", "tensor_group"):
        fmt.update(group_size=w.integer("group_size"), scale_bits=scale, zero_bits=zero)
        if strategy == "tensor_group":
            fmt["tensor_scale_bits"] = 32         # NVFP4's weight_global_scale
    elif strategy == "channel":
        fmt["row_scale_bits"] = scale + zero
    elif strategy == "block":
        block = w.ints("block_structure", minimum=1)
        if len(block) != 2:
            raise w.fail("block_structure", "expected [rows, cols]")
        fmt.update(block=block, scale_bits=scale)
    elif strategy == "tensor":
        fmt["tensor_scale_bits"] = scale + zero
    else:
        raise w.fail("strategy", f"unknown strategy {strategy!r}")
    return fmt


def _compressed_tensors(q: Config, dtype: int, dtype_name: str) -> Quantization:
    groups = q.section("config_groups")
    fmt_name = q.text("format", "pack-quantized")
    rules, formats = [], {}
    for gname in groups.data:
        gc = groups.section(gname)
        if gc.data.get("weights") is None:
            continue
        w = gc.section("weights")
        fmt = _ct_format(w, dtype)
        gfmt = gc.text("format", None) or fmt_name
        if gfmt in ("pack-quantized", "int-quantized") and fmt["bits"] < 16:
            fmt["tensor_scale_bits"] = fmt.get("tensor_scale_bits", 0) + 128   # weight_shape: 2 x int64
        ia = gc.data.get("input_activations")
        if isinstance(ia, dict) and ia.get("dynamic") is False:
            fmt["tensor_scale_bits"] = fmt.get("tensor_scale_bits", 0) + 32     # static input scale
        fmt["method"] = f"compressed-tensors {gfmt}"
        name = f"{gfmt.replace('-quantized', '').replace('-pack', '')}-{fmt['bits']}bit" + \
            (f"-g{fmt['group_size']}" if fmt.get("group_size") else "")
        formats[name] = fmt
        targets = gc.data.get("targets") or ["Linear"]
        if not isinstance(targets, list) or not all(isinstance(t, str) for t in targets):
            raise gc.fail("targets", "expected a list of module names or patterns")
        rules.append(_Rule(name, fmt, None if targets == ["Linear"] else targets, lm_head=True))
    ignore = q.data.get("ignore") or []
    return Quantization("compressed-tensors", dtype_name, formats, rules, list(ignore), "ct")


# ModelOpt's per-tensor algorithms (``quant_algo``) and what each stores beside the packed weights
# (vLLM's ``modelopt.py`` reads the same names): name -> (format name, format) for a group size
def _modelopt_format(algo: str, group: int | None) -> tuple[str, dict] | None:
    if algo == "NVFP4":               # fp8 scale per 16, fp32 global scale and static input scale
        g = group or 16
        return f"nvfp4-g{g}", {"bits": 4, "group_size": g, "scale_bits": 8, "tensor_scale_bits": 64,
                               "method": "modelopt NVFP4"}
    if algo == "W4A16_NVFP4":         # weight-only: no input scale
        g = group or 16
        return f"nvfp4-w4a16-g{g}", {"bits": 4, "group_size": g, "scale_bits": 8, "tensor_scale_bits": 32,
                                     "method": "modelopt W4A16_NVFP4"}
    if algo in ("FP8", "FP8_PER_TENSOR"):   # fp32 weight and input scales per tensor
        return "fp8", {"bits": 8, "tensor_scale_bits": 64, "method": "modelopt FP8"}
    if algo == "FP8_PER_CHANNEL_PER_TOKEN":  # fp32 scale per output channel, activations dynamic
        return "fp8-channel", {"bits": 8, "row_scale_bits": 32, "method": "modelopt FP8_PER_CHANNEL_PER_TOKEN"}
    if algo in ("FP8_PB_WO", "FP8_BLOCK_SCALES"):   # fp32 scale per square block, weight only
        b = group or 128
        return f"fp8-block{b}x{b}", {"bits": 8, "block": [b, b], "scale_bits": 32, "method": f"modelopt {algo}"}
    if algo == "MXFP8":               # e8m0 scale per 32
        return "mxfp8", {"bits": 8, "group_size": 32, "scale_bits": 8, "method": "modelopt MXFP8"}
    return None


_MODELOPT_LAYER_ALGOS = "NVFP4, W4A16_NVFP4, FP8, FP8_PER_CHANNEL_PER_TOKEN, FP8_PB_WO, FP8_BLOCK_SCALES, MXFP8"
_MODELOPT_READ = _MODELOPT_LAYER_ALGOS + ", MIXED_PRECISION"


def _modelopt(q: Config, dtype_name: str) -> Quantization:
    algo = (q.text("quant_algo", None) or "").upper()
    excl = q.data.get("exclude_modules") or q.data.get("ignore") or q.data.get("modules_to_not_convert") or []
    if algo == "MIXED_PRECISION":
        return _modelopt_mixed(q, dtype_name, list(excl))
    found = _modelopt_format(algo, q.integer("group_size", None))
    if found is None:
        raise q.fail("quant_algo", f"unsupported modelopt algorithm {algo!r} (read: {_MODELOPT_READ})")
    name, fmt = found
    return Quantization("modelopt", dtype_name, {name: fmt}, [_Rule(name, fmt, lm_head=True)], list(excl))


def _modelopt_mixed(q: Config, dtype_name: str, excl: list[str]) -> Quantization:
    """``MIXED_PRECISION``: ``quantized_layers`` names each quantized module (a whole ``mlp.experts``
    module or one projection) with its own algorithm; a module not listed keeps the checkpoint dtype."""
    layers = q.section("quantized_layers")
    formats: dict[str, dict] = {}
    targets: dict[str, list[str]] = {}
    for module in layers.data:
        e = layers.section(module)
        algo = (e.text("quant_algo") or "").upper()
        found = _modelopt_format(algo, e.integer("group_size", None))
        if found is None:
            raise e.fail("quant_algo", f"unsupported modelopt algorithm {algo!r} (read: {_MODELOPT_LAYER_ALGOS})")
        name, fmt = found
        formats[name] = fmt
        targets.setdefault(name, []).append(module)
    rules = [_Rule(name, formats[name], mods, lm_head=True, style="module") for name, mods in targets.items()]
    return Quantization("modelopt", dtype_name, formats, rules, excl)


# tensors a quantized checkpoint stores beside (or instead of) a module's ``weight``
_SCALE_LEAVES = ("weight_scale", "weight_scale_inv", "weight_scale_2", "weight_packed", "weight_global_scale",
                 "qweight", "qzeros", "scales", "SCB", "weight_zero_point", "blocks")


def index_modules(index: dict) -> tuple[frozenset, frozenset]:
    """(every module, the quantized ones) named by a ``model.safetensors.index.json``'s ``weight_map``:
    a module is quantized when it stores a scale or packed weight (``weight_scale``, ``weight_packed``,
    ``qweight``, bitsandbytes' ``weight.absmax``, ...)."""
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    modules, quantized = set(), set()
    for key in weight_map if isinstance(weight_map, dict) else ():
        if not isinstance(key, str) or "." not in key:
            continue
        if ".weight." in key:                      # bitsandbytes: <module>.weight.absmax, .quant_state...
            module = key.split(".weight.", 1)[0]
            quantized.add(module)
        else:
            module, leaf = key.rsplit(".", 1)
            if leaf in _SCALE_LEAVES or leaf.endswith(("_blocks", "_scales")):
                quantized.add(module)
        modules.add(module)
    return frozenset(modules), frozenset(quantized)


def read_quantization(text: Config, top: Config, sibling: dict | None, source_sibling: str | None,
                      index: tuple[frozenset, frozenset] | None = None) -> Quantization | None:
    """The checkpoint's stored formats, or None when the weights are stored plainly at the dtype."""
    dtype = dtype_bits(text, top)
    dtype_name = {16: "bf16", 32: "fp32", 8: "fp8"}.get(dtype, f"{dtype}bit")
    q = None
    for c in (text, top):
        if isinstance(c.data.get("quantization_config"), dict):
            q = c.section("quantization_config")
            break
    if q is None and sibling is not None:
        sc = Config(sibling, source_sibling or "hf_quant_config.json")
        if isinstance(sibling.get("quantization"), dict):
            q = sc.section("quantization")
            q.data = {**q.data, "quant_method": "modelopt"}
    if q is None:
        return None
    method = q.text("quant_method", None) or ("modelopt" if q.has("quant_algo") else None)
    if method is None:
        raise q.fail("quant_method", "required key is missing")
    method = method.lower()
    if method == "modelopt" and sibling is not None and isinstance(sibling.get("quantization"), dict) and (
            not q.has("quant_algo") or (str(q.data.get("quant_algo")).upper() == "MIXED_PRECISION"
                                        and not q.has("quantized_layers"))):
        sc = Config(sibling, source_sibling or "hf_quant_config.json")
        q = sc.section("quantization")
    plain_ignore = list(q.data.get("modules_to_not_convert") or q.data.get("ignored_layers") or [])
    out: Quantization
    if method == "fp8":
        block = q.data.get("weight_block_size")
        if block is not None:
            b = q.ints("weight_block_size", minimum=1)
            if len(b) != 2:
                raise q.fail("weight_block_size", "expected [rows, cols]")
            fmt = {"bits": 8, "block": b, "scale_bits": 32, "method": "fp8 block"}
            name = f"fp8-block{b[0]}x{b[1]}"
        else:
            static = q.data.get("activation_scheme") == "static"
            fmt = {"bits": 8, "tensor_scale_bits": 64 if static else 32, "method": "fp8 per-tensor"}
            name = "fp8"
        out = Quantization("fp8", dtype_name, {name: fmt}, [_Rule(name, fmt)], plain_ignore)
    elif method == "mxfp4":
        fmt = {"bits": 4, "group_size": 32, "scale_bits": 8, "method": "mxfp4"}
        out = Quantization("mxfp4", dtype_name, {"mxfp4": fmt}, [_Rule("mxfp4", fmt, experts_only=True)], plain_ignore)
    elif method == "compressed-tensors":
        out = _compressed_tensors(q, dtype, dtype_name)
    elif method == "modelopt":
        out = _modelopt(q, dtype_name)
    elif method in ("awq", "gptq"):
        bits = q.integer("bits", 4) if method == "gptq" else q.integer(q.first("bits", "w_bit") or "bits", 4)
        g = q.data.get("group_size", q.data.get("q_group_size", 128))
        if isinstance(g, bool) or not isinstance(g, int) or (g < 1 and g != -1):
            raise q.fail("group_size", f"expected a positive integer or -1, got {g!r}")
        zeros = bits if (method == "gptq" or q.data.get("zero_point", True)) else 0
        if g == -1:
            fmt = {"bits": bits, "row_scale_bits": 16 + zeros}
        else:
            fmt = {"bits": bits, "group_size": g, "scale_bits": 16, "zero_bits": zeros}
        if method == "gptq":
            fmt["index_bits"] = 32                # g_idx
        fmt["method"] = method
        name = f"{method}-{bits}bit" + (f"-g{g}" if g != -1 else "")
        out = Quantization(method, dtype_name, {name: fmt}, [_Rule(name, fmt)], plain_ignore)
    elif method == "bitsandbytes":
        skip = list(q.data.get("llm_int8_skip_modules") or []) + plain_ignore
        if q.data.get("load_in_4bit") or q.data.get("_load_in_4bit"):
            double = bool(q.data.get("bnb_4bit_use_double_quant", False))
            fmt = {"bits": 4, "group_size": 64, "flat_group": True, "scale_bits": 8 if double else 32,
                   "method": f"bitsandbytes {q.data.get('bnb_4bit_quant_type', 'fp4')}"}
            if double:
                fmt.update(nested_group=256, nested_scale_bits=32)
            name = "bnb-4bit"
        elif q.data.get("load_in_8bit") or q.data.get("_load_in_8bit"):
            fmt = {"bits": 8, "row_scale_bits": 32, "method": "bitsandbytes LLM.int8"}
            name = "bnb-8bit"
        else:
            raise q.fail("load_in_4bit", "neither load_in_4bit nor load_in_8bit is set")
        out = Quantization("bitsandbytes", dtype_name, {name: fmt}, [_Rule(name, fmt)], skip)
    else:
        raise q.fail("quant_method", f"unsupported quantization method {method!r} (read: fp8, mxfp4, "
                                     "compressed-tensors, modelopt, awq, gptq, bitsandbytes)")
    out.formats = {out.dtype: {"bits": dtype, "method": "checkpoint dtype"}, **out.formats}
    out.index = index if index is not None and index[1] else None
    return out


def _name(source: str) -> str:
    return source.replace("\\", "/").rsplit("/", 1)[-1]


# ModelOpt's ``kv_cache_quant_algo`` names and the bits each stores a KV element in
_KV_ALGO_BITS = {"FP8": 8, "NVFP4": 4, "INT8": 8}


def read_kv_cache_format(text: Config, top: Config, sibling: dict | None,
                         source_sibling: str | None) -> tuple[int, str] | None:
    """(bits, what says so) of the KV cache the checkpoint is calibrated for, or None when it keeps
    the KV cache at the activation dtype.

    Read from ``quantization_config.kv_cache_scheme`` (compressed-tensors, and ModelOpt's config.json:
    ``{"num_bits": 8, "type": "float"}`` is FP8), ``quantization_config.kv_cache_quant_algo`` or the
    sibling ``hf_quant_config.json``'s ``quantization.kv_cache_quant_algo`` (ModelOpt: ``"FP8"``).
    A null scheme or algorithm says the KV cache is not quantized."""
    places: list[tuple[Config, str]] = []
    for c in (text, top):
        if isinstance(c.data.get("quantization_config"), dict):
            places.append((c.section("quantization_config"), f"{_name(c.source)}: {c.prefix}quantization_config"))
            break
    if sibling is not None and isinstance(sibling.get("quantization"), dict):
        sc = Config(sibling, source_sibling or "hf_quant_config.json")
        places.append((sc.section("quantization"), f"{_name(sc.source)}: quantization"))
    for q, where in places:
        scheme = q.data.get("kv_cache_scheme")
        if isinstance(scheme, dict):
            s = q.section("kv_cache_scheme")
            bits = s.integer("num_bits")
            if not 1 <= bits <= 64:
                raise s.fail("num_bits", f"expected 1 to 64 bits, got {bits}")
            kind = s.text("type", "int")
            name = f"FP{bits}" if kind == "float" else f"INT{bits}"
            return bits, f"{name} ({where}.kv_cache_scheme: {bits}-bit {kind})"
        algo = q.data.get("kv_cache_quant_algo")
        if isinstance(algo, str) and algo.strip():
            name = algo.strip().upper()
            if name not in _KV_ALGO_BITS:
                raise q.fail("kv_cache_quant_algo", f"unknown KV cache algorithm {algo!r} "
                                                    f"(read: {', '.join(_KV_ALGO_BITS)})")
            return _KV_ALGO_BITS[name], f"{name} ({where}.kv_cache_quant_algo)"
    return None
