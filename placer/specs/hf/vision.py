"""A vision/audio tower's parameters from its config (the common ViT encoder plus a merger projector).

Per encoder layer: q, k, v, o projections with biases (``4*d*d + 4*d``), an MLP of width I
(``2*d*I + I + d``, or ``3*d*I`` for a gated one), two norms with biases (``4*d``); a patch embedding
``channels * patch^2 * temporal * d``; a final norm; and a projector from the merged patches
(``d * m^2``, m = the spatial merge size) through one hidden layer of that width to the text
model's hidden size. Towers whose code differs from this are counted exactly by the meta-device
path (``placer[hf]``) when transformers knows the model.
"""

from __future__ import annotations

from placer.specs.hf.config import Config

__all__ = ["vision_params"]


def vision_params(v: Config, text_hidden: int) -> int:
    d = v.any_integer(("hidden_size", "vt_hidden_size", "embed_dim", "width", "d_model"))
    layers = v.any_integer(("num_hidden_layers", "vt_num_hidden_layers", "depth", "num_layers", "encoder_layers"))
    inter = v.any_integer(("intermediate_size", "vt_intermediate_size", "mlp_dim", "encoder_ffn_dim"), None)
    if inter is None:
        ratio = v.data.get("mlp_ratio", 4)
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio < 64:
            raise v.fail("mlp_ratio", f"expected a positive number, got {ratio!r}")
        inter = int(d * ratio)
    act = str(v.data.get("hidden_act", v.data.get("activation_func", "gelu")))
    gated = act in ("silu", "swiglu")
    mlp = 3 * d * inter if gated else 2 * d * inter + inter + d
    per_layer = 4 * d * d + 4 * d + mlp + 4 * d
    patch = v.any_integer(("patch_size",), 14)
    channels = v.any_integer(("num_channels", "in_channels", "in_chans"), 3)
    temporal = v.any_integer(("temporal_patch_size",), 1)
    merge = v.data.get("spatial_merge_size", v.data.get("merge_kernel_size", 2))
    if isinstance(merge, list) and len(merge) == 2 and all(isinstance(x, int) for x in merge):
        m2 = merge[0] * merge[1]
    elif isinstance(merge, int) and not isinstance(merge, bool) and merge > 0:
        m2 = merge * merge
    else:
        raise v.fail("spatial_merge_size", f"expected an integer or [rows, cols], got {merge!r}")
    out = v.any_integer(("out_hidden_size", "text_hidden_size", "projection_dim"), text_hidden)
    merged = d * m2
    projector = merged * merged + merged + merged * out + out + 2 * d
    return layers * per_layer + channels * patch * patch * temporal * d + 2 * d + projector
