"""The model spec's schema: what a model YAML (compact or explicit form) may say, validated with
pydantic, unknown keys refused. :mod:`placer.specs.model` builds the layer graph from it.
"""

from __future__ import annotations

import math
from dataclasses import MISSING, fields
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, create_model, field_validator, model_validator

from placer.specs.layers import ATTENTION_MIXERS, LINEAR_MIXERS
from placer.specs.precision import WeightFormat
from placer.specs.spec_io import SpecName, StrictSpec, reject_bool
from placer.specs.units import parse_bytes, parse_tokens

KINDS = ("embedding", "vision", "attention", "linear_attention", "mtp", "lm_head", "ffn")
_MAX_COUNT = 10**18  # anything above is a typo, not a model

_NoBool = BeforeValidator(reject_bool)
PosInt = Annotated[int, _NoBool, Field(gt=0, le=_MAX_COUNT)]
NonNegInt = Annotated[int, _NoBool, Field(ge=0, le=_MAX_COUNT)]
Bits = Annotated[int, _NoBool, Field(ge=1, le=64)]



# ----------------------------------------------------------------------------- spec schema
class MixerSpec(StrictSpec):
    type: Literal["mha", "gqa", "sliding", "mla", "kda", "gated_deltanet", "lightning", "mamba", "mamba2"]
    num_heads: PosInt | None = None
    num_kv_heads: PosInt | None = None
    head_dim: PosInt | None = None
    qkv_bias: bool = False
    o_bias: bool = False
    qk_norm: bool | Literal["full"] = False     # true: one norm per head dim; "full": over all heads
    gated: bool = False                         # q_proj also emits a per-channel output gate
    output_gate: bool = False                   # a separate g_proj gates the attention output
    sinks: bool = False
    sliding_window: PosInt | None = None
    q_lora_rank: PosInt | None = None
    kv_lora_rank: PosInt | None = None
    qk_nope_head_dim: NonNegInt | None = None
    qk_rope_head_dim: NonNegInt | None = None
    v_head_dim: PosInt | None = None
    index_head_dim: PosInt | None = None        # DSA indexer: its key cache per token and heads
    index_num_heads: PosInt | None = None
    full_rank_gate: bool = False                # KDA output gate as one full-rank projection
    conv_kernel: Bits = 4
    num_k_heads: PosInt | None = None
    num_v_heads: PosInt | None = None
    head_k_dim: PosInt | None = None
    head_v_dim: PosInt | None = None
    d_inner: PosInt | None = None
    expand: PosInt | None = None
    d_state: PosInt | None = None
    d_conv: Bits = 4
    dt_rank: PosInt | None = None
    n_groups: PosInt | None = None
    proj_bias: bool = False                     # Mamba-2 in/out projections with biases
    conv_bias: bool = True
    # explicit overrides (used as given instead of the formula)
    params: NonNegInt | None = None
    kv_elements_per_token: NonNegInt | None = None
    state_elements_per_request: NonNegInt | None = None
    conv_state_elements_per_request: NonNegInt | None = None

    @model_validator(mode="after")
    def _required(self):
        need = {
            "mha": ["num_heads"], "gqa": ["num_heads", "num_kv_heads"],
            "sliding": ["num_heads", "num_kv_heads", "sliding_window"],
            "mla": ["num_heads", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"],
            "kda": ["num_heads", "head_dim"],
            "gated_deltanet": ["num_k_heads", "num_v_heads", "head_k_dim", "head_v_dim"],
            "lightning": ["num_heads", "head_dim"],
            "mamba": ["d_state"], "mamba2": ["d_state", "num_heads"],
        }[self.type]
        missing = [k for k in need if getattr(self, k) is None]
        if missing:
            raise ValueError(f"a {self.type} mixer needs {', '.join(missing)}")
        if (self.index_head_dim is None) != (self.index_num_heads is None):
            raise ValueError("a DSA indexer needs both index_head_dim and index_num_heads")
        return self


class FfnSpec(StrictSpec):
    type: Literal["dense", "moe"]
    intermediate_size: PosInt | None = None
    bias: bool = False
    gated: bool = True                          # (Swi)GLU: gate, up, down; false: up, down
    num_experts: PosInt | None = None
    experts_per_token: PosInt | None = None
    moe_intermediate_size: PosInt | None = None
    num_shared_experts: NonNegInt = 0
    shared_intermediate_size: PosInt | None = None
    shared_expert_gate: bool = False
    shared_gated: bool | None = None            # shared experts' GLU, when it differs from the routed ones
    latent_size: PosInt | None = None           # latent MoE: experts run at this width
    latent_norm: bool = False
    router_bias: bool = False
    expert_bias: bool = False
    params: NonNegInt | None = None

    @model_validator(mode="after")
    def _required(self):
        need = ["intermediate_size"] if self.type == "dense" else [
            "num_experts", "experts_per_token", "moe_intermediate_size"]
        missing = [k for k in need if getattr(self, k) is None]
        if missing and self.params is None:
            raise ValueError(f"a {self.type} ffn needs {', '.join(missing)}")
        if self.type == "moe" and self.num_experts and self.experts_per_token and \
                self.experts_per_token > self.num_experts:
            raise ValueError("experts_per_token exceeds num_experts")
        return self


class LayerTypeSpec(StrictSpec):
    mixer: str | None = None    # none: an FFN-only layer
    ffn: str | None = None
    # stored format name -> tensor names (fnmatch patterns) kept in it; the rest at weight_storage.default
    storage: dict[str, list[str]] = Field(default_factory=dict)
    params: NonNegInt | None = None   # total parameters of the layer, overriding the formulas
    # parameters one token reads (MoE: router, shared and top-k experts); with `params` only
    active_params: NonNegInt | None = None

    @model_validator(mode="after")
    def _active(self):
        if self.active_params is not None:
            if self.params is None:
                raise ValueError("active_params is given with params (the formulas derive it otherwise)")
            if self.active_params > self.params:
                raise ValueError(f"active_params {self.active_params} exceeds params {self.params}")
        return self


# a stored format as a spec writes it: the fields of :class:`~placer.specs.precision.WeightFormat` (their
# one definition), each with its spec constraint, and ``method``, what the checkpoint calls it
_FORMAT_TYPES = {"int": NonNegInt, "bool": bool, "tuple[int, int] | None": tuple[PosInt, PosInt] | None}
FormatSpec = create_model(
    "FormatSpec", __base__=StrictSpec, __module__=__name__,
    **{f.name: (Bits if f.name == "bits" else _FORMAT_TYPES[f.type],
                ... if f.default is MISSING else f.default) for f in fields(WeightFormat)},
    method=(str | None, None))


class StorageSpec(StrictSpec):
    """Weights as the checkpoint stores them: named formats, the default one, embedding and head."""
    formats: dict[str, FormatSpec]
    default: str
    embedding: str | None = None
    lm_head: str | None = None

    @model_validator(mode="after")
    def _names(self):
        for key in ("default", "embedding", "lm_head"):
            v = getattr(self, key)
            if v is not None and v not in self.formats:
                raise ValueError(f"{key}: unknown format {v!r} (defined: {sorted(self.formats)})")
        return self


class ExtraNodeSpec(StrictSpec):
    """A node outside the decoder stack: a vision/audio tower, or multi-token-prediction layers."""
    params: NonNegInt = 0
    format: str | None = None
    layer_type: str | None = None   # MTP: the decoder layer type each MTP layer repeats
    count: PosInt = 1
    extra_params: NonNegInt = 0     # MTP: projections and norms beside the decoder layer
    kv_elements_per_token: NonNegInt = 0


class WorkloadDefaults(StrictSpec):
    context: int | str | None = None
    concurrency: PosInt | None = None
    weight_bits: Bits | None = None
    kv_bits: Bits | None = None
    state_bits: Bits | None = None
    conv_state_bits: Bits | None = None
    activation_bits: Bits | None = None
    micro_batch: PosInt | None = None

    @field_validator("context")
    @classmethod
    def _context(cls, v):
        if v is None:
            return v
        return parse_tokens(v)


class TrafficDefaults(StrictSpec):
    """The traffic a model's speeds assume when a command is given none (placer.simulate.arguments
    reads it): ``isl`` prompt tokens, ``osl`` output tokens (a number like 8k, or a distribution
    such as ``lognormal:8k,1.0``), ``cached_prompt`` tokens or a share (``90%``) of each prompt in
    the prefix cache, and ``source``, where the shape comes from."""

    isl: int | str | None = None
    osl: int | str | None = None
    cached_prompt: int | str | None = None
    source: str | None = None


class ExplicitLayer(StrictSpec):
    kind: Literal["embedding", "vision", "attention", "linear_attention", "lm_head"]
    name: str | None = None
    mixer: str | None = None
    ffn: Literal["dense", "moe"] | None = None
    params: NonNegInt | None = None
    weight_bytes: int | str | None = None
    kv_elements_per_token: NonNegInt = 0
    kv_bytes_per_token: int | str | None = None
    kv_window: PosInt | None = None
    state_elements_per_request: NonNegInt = 0
    state_bytes_per_request: int | str | None = None
    activation_elements_per_token: NonNegInt | None = None
    # what tensor parallelism splits (a meta-device import records them): every tensor's name (as the
    # module tree names it) and shape, summing to params; the attention heads (query, KV) the
    # layer's projections hold; an embedding's or LM head's vocabulary
    tensors: dict[str, list[PosInt]] | None = None
    heads: tuple[PosInt, PosInt] | None = None
    vocab_size: PosInt | None = None

    @field_validator("weight_bytes", "kv_bytes_per_token", "state_bytes_per_request", mode="before")
    @classmethod
    def _bytes(cls, v):
        if v is None:
            return v
        n = parse_bytes(v)
        if n > 10**21:
            raise ValueError(f"{n} bytes is beyond any device (limit 1 ZB)")
        return n

    @model_validator(mode="after")
    def _some_size(self):
        if self.params is None and self.weight_bytes is None:
            raise ValueError("a layer needs params or weight_bytes")
        if not self.params and not self.weight_bytes:
            raise ValueError("a layer of zero size: params or weight_bytes must be positive")
        if self.kind == "attention" and self.mixer not in (None, *ATTENTION_MIXERS):
            raise ValueError(f"mixer {self.mixer!r} is not an attention mixer {ATTENTION_MIXERS}")
        if self.kind == "linear_attention" and self.mixer not in (None, *LINEAR_MIXERS):
            raise ValueError(f"mixer {self.mixer!r} is not a linear-attention mixer {LINEAR_MIXERS}")
        if self.tensors is not None:
            total = sum(math.prod(shape) for shape in self.tensors.values())
            if self.params is None or total != self.params:
                raise ValueError(f"the tensors hold {total:,} parameters but params is {self.params}")
            if any(not shape for shape in self.tensors.values()):
                raise ValueError("a tensor needs a shape of at least one dimension")
        return self



class ModelSpec(StrictSpec):
    name: SpecName
    description: str | None = None
    notes: str | None = None
    source: str | None = None
    architecture: str | None = None
    published_total_params: PosInt | None = None
    hidden_size: PosInt | None = None
    vocab_size: PosInt | None = None
    tie_word_embeddings: bool = False
    fold_embeddings: bool = False
    # false: the model reads its input embeddings from another model's table (a draft head sharing
    # its target's), so it has no embedding node of its own
    input_embedding: bool = True
    norm_params_per_layer: NonNegInt | None = None
    num_layers: PosInt | None = None
    pattern: str | None = None
    mixers: dict[str, MixerSpec] = Field(default_factory=dict)
    ffns: dict[str, FfnSpec] = Field(default_factory=dict)
    layer_types: dict[str, LayerTypeSpec] = Field(default_factory=dict)
    layers: list[ExplicitLayer] | None = None
    default_workload: WorkloadDefaults | None = None
    default_traffic: TrafficDefaults | None = None
    weight_storage: StorageSpec | None = None
    vision_tower: ExtraNodeSpec | None = None
    mtp: ExtraNodeSpec | None = None
    workload_notes: str | None = None
    # the KV-cache format the checkpoint is calibrated for, as an import read it (e.g. "FP8
    # (hf_quant_config.json: quantization.kv_cache_quant_algo)"); default_workload.kv_bits holds its bits
    kv_cache_format: str | None = None
    # what an import could not read as the checkpoint stores it (printed as warnings)
    import_warnings: list[str] = Field(default_factory=list)
    # the longest context the model was trained for (config.json's key); longer contexts are
    # planned as asked, with a warning
    max_position_embeddings: PosInt | None = None

    @model_validator(mode="after")
    def _form(self):
        if self.layers is None and self.pattern is None:
            raise ValueError("a model needs either `layers` (explicit form) or `pattern` (compact form)")
        if self.layers is not None and self.pattern is not None:
            raise ValueError("give either `layers` or `pattern`, not both")
        if self.layers is not None and not self.layers:
            raise ValueError("`layers` is empty")
        if self.pattern is not None and self.hidden_size is None:
            raise ValueError("the compact form needs hidden_size")
        return self


