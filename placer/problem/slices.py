"""One rank's slice of each tensor of a layer run by a group of ``tp`` devices (the rules of
:mod:`placer.problem.parallel`, tensor by tensor): KV heads per rank, the split of each tensor by
its name, and for weights kept in a checkpoint's stored formats the stored bytes of a rank's
slices, scales included, a slice that cuts through a scale group or block refused with the
tensor named."""

from __future__ import annotations

from placer.specs.layers import ffn_tensors, mixer_tensors
from placer.specs.model import Layer
from placer.specs.precision import WeightFormat, tensor_bytes

__all__ = ["kv_heads_per_rank", "with_inner", "stored_slices", "stored_bytes_per_rank", "cut_hint"]


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def kv_heads_per_rank(nkv: int, g: int) -> int:
    """KV heads one of ``g`` ranks holds of ``nkv``: its share, or one (replicated) when ``g > nkv``."""
    return nkv // g if g <= nkv else 1


def with_inner(d: dict, h: int) -> dict:
    """Mixer dims ``d`` with a Mamba mixer's ``d_inner`` filled in (``expand x h``, default 2)."""
    if d["type"] in ("mamba", "mamba2"):
        d = dict(d)
        d["d_inner"] = d.get("d_inner") or (d.get("expand") or 2) * h
    return d


# how each tensor of a decoder layer splits, by the end of its name: "out" (column-parallel: rows, or
# the channels of a convolution or a per-head vector), "in" (row-parallel: columns), "kv" (rows by
# KV head), "whole" (replicated); names not listed split "out"
_WHOLE_ENDINGS = ("o_proj.bias", "q_a_proj.weight", "q_a_layernorm.weight", "kv_a_proj_with_mqa.weight",
                  "kv_a_layernorm.weight", "f_a_proj.weight", "g_a_proj.weight", "o_norm.weight",
                  "linear_attn.norm.weight", "out_proj.bias", "down_proj.bias", "mlp.shared_expert_gate.weight")
_IN_ENDINGS = ("o_proj.weight", "out_proj.weight", "down_proj.weight", "x_proj.weight")


def _split_of(name: str, mixer: dict, role: str) -> str:
    """How the tensor ``name`` (of ``role``, in a layer whose mixer is ``mixer``) splits across ranks."""
    t = mixer.get("type") if mixer else None
    if role in ("norm", "router", "latent") or name.endswith(_WHOLE_ENDINGS):
        return "whole"
    if name.endswith(_IN_ENDINGS):
        return "in"
    if t in ("mha", "gqa", "sliding") and role == "mixer":
        if name.startswith(("self_attn.k_proj.", "self_attn.v_proj.")):
            return "kv"
        if name.endswith(("q_norm.weight", "k_norm.weight")):
            if mixer.get("qk_norm") != "full":
                return "whole"
            return "kv" if name.endswith("k_norm.weight") else "out"
    if t == "mamba2" and role == "mixer" and name.startswith(("mamba.in_proj.", "mamba.conv1d.")):
        return "mamba2_in" if name.startswith("mamba.in_proj.") else "mamba2_conv"
    return "out"


def _slice(shape: tuple[int, ...], split: str, mixer: dict, role: str, g: int, ep: bool, e: int) -> tuple[int, ...]:
    """The shape one rank holds of a tensor of ``shape``."""
    s = list(shape)
    if role == "experts" and ep:
        s[0] = _ceil(e, g)                                   # whole experts, ceil(E / g) on the heaviest rank
        return tuple(s)
    axis = 1 if role == "experts" and len(s) > 1 else 0      # stacked experts: (E, out, in)
    if split == "whole":
        return shape
    if split == "in":
        s[-1] //= g
    elif split == "kv":
        nkv = mixer.get("num_kv_heads") or mixer["num_heads"]
        s[axis] = s[axis] * kv_heads_per_rank(nkv, g) // nkv
    elif split.startswith("mamba2"):
        # x, z (in_proj only), B and C per group (one replicated group when they do not split), dt heads
        nh, di, ng, ds = mixer["num_heads"], mixer["d_inner"], mixer.get("n_groups", 1), mixer["d_state"]
        ngr = ng // g if ng % g == 0 else 1
        s[0] = 2 * di // g + 2 * ngr * ds + nh // g if split == "mamba2_in" else di // g + 2 * ngr * ds
    else:
        s[axis] //= g
    return tuple(s)


def _cut_reason(fmt: WeightFormat, full: tuple[int, ...], part: tuple[int, ...], stacked: bool) -> str | None:
    """Why slicing ``full`` to ``part`` cuts through ``fmt``'s scale groups or blocks (None: it does not)."""
    if full == part or (fmt.bits >= 16 and not (fmt.group_size or fmt.block)):
        return None
    mat_full, mat_part = (full[1:], part[1:]) if stacked else (full, part)
    if len(mat_full) < 2 or mat_full == mat_part:
        return None                                          # a vector, or whole experts
    rows, cols = mat_part[-2], mat_part[-1]
    if fmt.block:
        r, c = fmt.block
        if rows != mat_full[-2] and rows % r:
            return f"a slice of {rows} rows cuts its {r}x{c} scale blocks"
        if cols != mat_full[-1] and cols % c:
            return f"a slice of {cols} columns cuts its {r}x{c} scale blocks"
    if fmt.group_size:
        if fmt.flat_group and (rows * cols) % fmt.group_size:
            return f"a slice of {rows * cols} weights cuts its flat groups of {fmt.group_size}"
        if cols != mat_full[-1] and cols % fmt.group_size:
            return f"a slice of {cols} columns cuts its groups of {fmt.group_size}"
    return None


def cut_hint(name: str, why: str, ep: bool) -> str:
    """``why`` a slice of tensor ``name`` is refused, with the flag that keeps experts whole when it helps."""
    return why + (" (--ep keeps experts whole)" if name.startswith("mlp.experts.") and not ep else "")


def stored_slices(layer: Layer, hidden: int, tp: int, ep: bool = False):
    """Each stored tensor of a decoder (or MTP) layer as one rank of a degree-``tp`` group holds it:
    ``(name, full shape, slice shape, why the slice is not allowed or None)``."""
    formats = {name: grp.fmt for grp in layer.weight_groups for name in grp.tensors}
    mixer = with_inner(dict(layer.mixer_dims), hidden) if layer.mixer_dims else {}
    ffn = dict(layer.ffn_dims) if layer.ffn_dims else None
    tensors = (mixer_tensors(mixer, hidden) if mixer else []) + ffn_tensors(ffn, hidden)
    # physical experts: the routed ones and their redundant copies (placer.specs.experts)
    e = ffn["num_experts"] + ffn.get("redundant_experts", 0) if ffn and ffn["type"] == "moe" else 1
    out = []
    for t in tensors:
        if not t.numel:
            continue
        part = _slice(t.shape, _split_of(t.name, mixer, t.role), mixer, t.role, tp, ep, e)
        fmt = formats.get(t.name)
        why = None if fmt is None else _cut_reason(fmt, t.shape, part, t.role == "experts")
        out.append((t.name, t.shape, part, why))
    return out


def stored_bytes_per_rank(layer: Layer, hidden: int, tp: int, ep: bool) -> int:
    """The heaviest rank's bytes of ``layer``'s stored tensors: each slice at its format, scales
    included (a layer the degree allows, :func:`placer.problem.parallel.refusal`)."""
    if layer.kind in ("embedding", "lm_head"):
        b = 0
        for grp in layer.weight_groups:
            if grp.role in ("embedding", "lm_head"):
                b += tensor_bytes((_ceil(layer.vocab_size, tp), hidden), grp.fmt)    # vocabulary rows
            else:
                b += grp.bytes                                                     # the final norm: whole
        return b
    formats = {name: grp.fmt for grp in layer.weight_groups for name in grp.tensors}
    # the layer's norms and what is known only by its count (an MTP block's own projection) are whole
    b = sum(grp.bytes for grp in layer.weight_groups if grp.role == "norm" or not grp.tensors)
    for name, _full, part, why in stored_slices(layer, hidden, tp, ep):
        if why is not None:
            raise ValueError(f"{layer.name}: {name}: {why}")
        b += tensor_bytes(part, formats[name], stacked=name.startswith("mlp.experts."))
    return b
