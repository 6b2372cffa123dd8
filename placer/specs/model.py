"""The model as a layer graph with exact per-layer counts.

A model spec comes in two forms (both YAML, validated with pydantic, unknown keys refused):

* **compact**: ``hidden_size``, ``num_layers``, named ``mixers`` and ``ffns`` with their
  dimensions, ``layer_types`` (a letter -> mixer + ffn) and a ``pattern`` such as
  ``"(KKKM)*23 M"`` that spells the decoder layers in order;
* **explicit**: ``layers:`` one entry per decoder layer with counts or fixed byte sizes.

Both produce a :class:`LayerGraph`: a ``networkx.DiGraph`` of :class:`Layer` nodes in pipeline
order (embedding first and LM head last unless folded). Counts are exact integers; bytes at a
given precision come from :mod:`placer.problem.memory`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import (
    ValidationError,
)

from placer.specs.errors import InvalidSpec
from placer.specs.hf import load_config_json, spec_from_hf_file
from placer.specs.layers import (
    ATTENTION_MIXERS,
    Tensor,
    ffn_counts,
    ffn_tensors,
    mixer_counts,
    mixer_tensors,
)
from placer.specs.model_spec import (  # noqa: F401  (the spec classes stay importable from here)
    _FORMAT_TYPES,
    _MAX_COUNT,
    KINDS,
    Bits,
    ExplicitLayer,
    ExtraNodeSpec,
    FfnSpec,
    FormatSpec,
    LayerTypeSpec,
    MixerSpec,
    ModelSpec,
    NonNegInt,
    PosInt,
    StorageSpec,
    WorkloadDefaults,
    _NoBool,
)
from placer.specs.precision import WeightFormat, tensor_bytes
from placer.specs.spec_io import load_yaml_or_json, pydantic_error, spec_sha256

if TYPE_CHECKING:   # networkx loads on first use of LayerGraph.graph
    import networkx as nx

__all__ = ["Layer", "LayerGraph", "WeightGroup", "load_model", "model_from_dict", "parse_pattern", "KINDS",
           "DRAFT_PREFIX", "DRAFT_EMBEDDING", "is_draft_node", "mtp_count"]

# names of a draft model's nodes placed beside the target's (placer.specs.speculative.with_draft)
DRAFT_PREFIX = "draft."
# the drafter's own copy of the vocabulary embedding on the last stage (placer.specs.speculative)
DRAFT_EMBEDDING = "mtp.embed_tokens"

# ----------------------------------------------------------------------------- layer graph
@dataclass(frozen=True)
class WeightGroup:
    """Tensors of one role (mixer, dense, experts, shared, router, norm, ...) stored in one format."""

    role: str
    format: str          # the format's name in the spec
    label: str           # what it is, e.g. ``4-bit, g32 8-bit scales``
    params: int
    bytes: int
    # the format itself and the tensors held in it (names of placer.specs.layers' tensor lists), which
    # tensor parallelism's per-rank rules split tensor by tensor; () for a group known by its count
    fmt: WeightFormat | None = None
    tensors: tuple[str, ...] = ()


@dataclass(frozen=True)
class Layer:
    """One node of the layer graph, with exact integer counts.

    ``index`` is the 0-based decoder-layer index (``None`` for embedding and head). A node made by
    refining a layer (``split`` mode) keeps its parent layer's ``index`` and names its ``part``.
    Fixed ``*_bytes`` values, when set, are used as given whatever the workload precisions.
    """

    name: str
    kind: str
    index: int | None = None
    mixer: str | None = None
    ffn: str | None = None
    params_mixer: int = 0
    params_ffn: int = 0
    params_other: int = 0
    active_params: int = 0
    weight_bytes_fixed: int | None = None
    kv_elements_per_token: int = 0
    kv_bytes_per_token_fixed: int | None = None
    kv_window: int | None = None
    state_elements_per_request: int = 0
    conv_state_elements_per_request: int = 0
    state_bytes_per_request_fixed: int | None = None
    activation_elements_per_token: int = 0
    num_experts: int = 0
    expert_params: int = 0
    shared_params: int = 0
    part: str | None = None
    parent: str | None = None
    # weights as the checkpoint stores them, one entry per (role, format); empty: at --weight-bits
    weight_groups: tuple[WeightGroup, ...] = ()
    # Shape facts tensor parallelism needs (placer.problem.parallel): the mixer's and the FFN's spec
    # dimensions as sorted (key, value) pairs, and the vocabulary of an embedding or LM head.
    # Empty when the spec gives sizes as totals (then only degree 1 applies).
    mixer_dims: tuple[tuple[str, object], ...] = ()
    ffn_dims: tuple[tuple[str, object], ...] = ()
    vocab_size: int = 0
    # A layer known by its tensors rather than dimensions (a meta-device import): each tensor's
    # name and shape, and the attention heads (query, KV) its projections hold; tensor parallelism
    # splits each tensor by its role (placer.problem.named_shards)
    tensors: tuple[tuple[str, tuple[int, ...]], ...] = ()
    heads: tuple[int, int] | None = None

    @property
    def params(self) -> int:
        return self.params_mixer + self.params_ffn + self.params_other

    @property
    def has_kv(self) -> bool:
        return self.kv_elements_per_token > 0 or bool(self.kv_bytes_per_token_fixed)

    @property
    def has_state(self) -> bool:
        return (self.state_elements_per_request + self.conv_state_elements_per_request > 0
                or bool(self.state_bytes_per_request_fixed))


@dataclass(frozen=True)
class LayerGraph:
    """A model: layers in pipeline order and the DAG joining them (a chain for decoders)."""

    name: str
    layers: tuple[Layer, ...]
    edges: tuple[tuple[int, int], ...]
    hidden_size: int = 0
    num_hidden_layers: int = 0
    sha256: str = ""
    source: str = ""
    default_workload: dict = field(default_factory=dict)
    # the traffic speeds assume when none is given (the spec's default_traffic: isl, osl, cached_prompt)
    default_traffic: dict = field(default_factory=dict)
    published_total_params: int | None = None
    granularity: str = "layer"
    description: str = ""
    notes: tuple[str, ...] = ()     # what every output using this model should say about it
    architecture: str = ""          # the spec's architecture class (runtimes look models up by it)
    max_context_tokens: int | None = None   # the spec's max_position_embeddings, when it states one
    # what a load option changed against the spec (a mapping records it, so every command reloads the
    # same graph): nodes of the spec left out (``vision_tower`` under --text-only), and whether the
    # spec's multi-token-prediction layers were added (--mtp)
    dropped: tuple[str, ...] = ()
    mtp_included: bool = False
    # the KV-cache format the checkpoint is calibrated for (the spec's kv_cache_format; its bits are
    # default_workload["kv_bits"]), empty when the spec does not say
    kv_cache_format: str = ""

    def __post_init__(self):
        # Edges pointing forward in pipeline order make the graph acyclic by construction.
        n = len(self.layers)
        for u, v in self.edges:
            if not 0 <= u < v < n:
                raise ValueError(f"layer graph of {self.name}: edge ({u}, {v}) does not point forward")

    @cached_property
    def graph(self) -> nx.DiGraph:
        import networkx as nx

        g = nx.DiGraph()
        for i, layer in enumerate(self.layers):
            g.add_node(i, layer=layer)
        g.add_edges_from(self.edges)
        return g

    @cached_property
    def is_chain(self) -> bool:
        return self.edges == tuple((i, i + 1) for i in range(len(self.layers) - 1))

    @property
    def total_params(self) -> int:
        return sum(layer.params for layer in self.layers)

    def decoder_layers(self) -> tuple[Layer, ...]:
        return tuple(layer for layer in self.layers if layer.index is not None)

    def count_by_kind(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for layer in self.layers:
            counts[layer.kind] = counts.get(layer.kind, 0) + 1
        return counts


# ----------------------------------------------------------------------------- building
_TOKEN = re.compile(r"\s*(?:(\()|(\))|([A-Za-z])|(\*)\s*([0-9]+)|(,))")


def parse_pattern(pattern: str) -> list[str]:
    """Expand a layer pattern: letters, ``X*N`` repeats, ``(...)*N`` groups; spaces and commas ignored.

    >>> "".join(parse_pattern("(KKKM)*2 M"))
    'KKKMKKKMM'
    """
    stack: list[list[str]] = [[]]
    pos = 0
    last: list[str] | None = None
    text = pattern.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ValueError(f"cannot read pattern at position {pos}: {text[pos:pos + 10]!r}")
        pos = m.end()
        if m.group(1):
            stack.append([])
            last = None
        elif m.group(2):
            if len(stack) == 1:
                raise ValueError("unbalanced ')' in pattern")
            group = stack.pop()
            stack[-1].extend(group)
            last = group
        elif m.group(3):
            stack[-1].append(m.group(3))
            last = [m.group(3)]
        elif m.group(4):
            n = int(m.group(5))
            if last is None:
                raise ValueError("'*N' must follow a letter or a group")
            if n < 1 or n > 10**6:
                raise ValueError(f"repeat count {n} out of range")
            del stack[-1][len(stack[-1]) - len(last):]
            stack[-1].extend(last * n)
            if len(stack[-1]) > 10**7:
                raise ValueError("pattern expands to more than 10 million layers")
            last = None
        else:
            last = None
    if len(stack) != 1:
        raise ValueError("unbalanced '(' in pattern")
    return stack[0]


def load_model(ref: str | Path, *, fold_embeddings: bool | None = None, mtp: bool = False,
               text_only: bool = False) -> LayerGraph:
    """Load a model by catalog name (``kimi-k3``), YAML spec path, or Hugging Face ``config.json`` path.

    ``mtp`` adds the model's multi-token-prediction layers (off by default: a speculative-decoding
    add-on); ``text_only`` drops its vision/audio tower.
    """
    from placer.specs.catalog import resolve_model

    path = resolve_model(ref)
    if path.is_dir() and path.suffix not in (".yaml", ".yml", ".json"):   # a Hugging Face snapshot directory
        data = spec_from_hf_file(path)
        return model_from_dict(data, source=str(path), sha256=spec_sha256(data), fold_embeddings=fold_embeddings,
                               mtp=mtp, text_only=text_only)
    data, _ = load_yaml_or_json(path) if path.suffix != ".json" else (None, "")
    if data is None:
        data = load_config_json(path)
        # a placer spec written as JSON is read as strictly as YAML (no NaN); anything else is a config.json
        if "model_type" in data or "architectures" in data or not ("layers" in data or "pattern" in data):
            data = spec_from_hf_file(path, data)
        else:
            data, _ = load_yaml_or_json(path)
    return model_from_dict(data, source=str(path), sha256=spec_sha256(data), fold_embeddings=fold_embeddings,
                           mtp=mtp, text_only=text_only)


def model_from_dict(data: dict, *, source: str = "<model>", sha256: str = "",
                    fold_embeddings: bool | None = None, mtp: bool = False, text_only: bool = False) -> LayerGraph:
    """Build a :class:`LayerGraph` from a spec mapping; raises :class:`InvalidSpec` naming the field."""
    try:
        spec = ModelSpec.model_validate(data)
    except ValidationError as exc:
        raise pydantic_error(source, exc) from None
    fold = spec.fold_embeddings if fold_embeddings is None else fold_embeddings
    storage = _Storage(spec, source)
    if spec.layers is not None:
        body = _explicit_layers(spec, source)
        built: dict[str, Layer] = {}
        towers = [x for x in body if x.kind == "vision"]
        if text_only and towers:
            # a tower listed among the layers (a meta-device import): --text-only drops it as well
            body = [x for x in body if x.kind != "vision"]
    else:
        built = _layer_types(spec, source, storage)
        body = _compact_layers(spec, source, built)
        towers = []
    h = spec.hidden_size or 0
    layers: list[Layer] = []
    wl = spec.default_workload.model_dump(exclude_none=True) if spec.default_workload else {}
    notes = [f"warning: {w}" for w in spec.import_warnings] + ([spec.workload_notes] if spec.workload_notes else [])
    if text_only and spec.layers is not None and towers:
        notes.append(f"vision/audio tower ({sum(x.params for x in towers):,} parameters) dropped (--text-only)")
    if spec.vision_tower is not None:
        if text_only:
            notes.append("vision/audio tower dropped (--text-only)")
        else:
            v = spec.vision_tower
            layers.append(Layer(name="vision_tower", kind="vision", params_other=v.params, active_params=v.params,
                                activation_elements_per_token=h,
                                weight_groups=storage.groups_of_params("vision", v.params, v.format, "vision_tower")))
            notes.append(f"vision/audio tower ({v.params:,} parameters) is its own node, placed before the "
                         "embedding (--text-only drops it)")
    if spec.vocab_size and h and not fold and spec.input_embedding and not any(x.kind == "embedding" for x in body):
        layers.append(Layer(name="embedding", kind="embedding", params_other=spec.vocab_size * h,
                            active_params=h, activation_elements_per_token=h, vocab_size=spec.vocab_size,
                            weight_groups=storage.embedding_groups(spec.vocab_size * h, "embedding")))
    layers.extend(body)
    if spec.mtp is not None:
        if mtp:
            layers.extend(_mtp_layers(spec, source, built, storage))
            notes.append(f"{spec.mtp.count} multi-token-prediction layer(s) included (--mtp)")
        else:
            notes.append(f"{spec.mtp.count} multi-token-prediction layer(s) in the checkpoint are not placed "
                         "(--mtp includes them)")
    if spec.vocab_size and h and not fold and not any(x.kind == "lm_head" for x in body):
        head = 0 if spec.tie_word_embeddings else spec.vocab_size * h
        groups = storage.embedding_groups(head, "lm_head") + storage.groups_of_params("norm", h, None, "norm")
        layers.append(Layer(name="lm_head", kind="lm_head", params_other=head + h,
                            active_params=spec.vocab_size * h + h, activation_elements_per_token=0,
                            vocab_size=spec.vocab_size, weight_groups=groups if storage.active else ()))
    edges = tuple((i, i + 1) for i in range(len(layers) - 1))
    n_dec = sum(1 for x in layers if x.index is not None)
    return LayerGraph(name=spec.name, layers=tuple(layers), edges=edges, hidden_size=h,
                      num_hidden_layers=n_dec, sha256=sha256, source=source, default_workload=wl,
                      default_traffic=spec.default_traffic.model_dump(exclude_none=True) if spec.default_traffic else {},
                      published_total_params=spec.published_total_params,
                      description=spec.description or "", notes=tuple(notes),
                      architecture=spec.architecture or "", max_context_tokens=spec.max_position_embeddings,
                      dropped=("vision_tower",) if text_only and (spec.vision_tower is not None or towers) else (),
                      mtp_included=bool(mtp and spec.mtp is not None), kv_cache_format=spec.kv_cache_format or "")


def _explicit_layers(spec: ModelSpec, source: str) -> list[Layer]:
    out = []
    dec = 0
    h = spec.hidden_size or 0
    seen: dict[str, int] = {}
    for i, e in enumerate(spec.layers or []):
        decoder = e.kind in ("attention", "linear_attention")
        name = e.name or (f"layers.{dec}" if decoder else e.kind)
        if name in seen:
            # Names identify nodes in pins and mappings; two nodes of one name would be ambiguous.
            raise InvalidSpec(source, f"layers.{i}.name", f"duplicate layer name {name!r} (also layers.{seen[name]})")
        seen[name] = i
        if e.kind == "attention" and not (e.kv_elements_per_token or e.kv_bytes_per_token):
            raise InvalidSpec(source, f"layers.{i}.kv_bytes_per_token",
                              "an attention layer needs kv_bytes_per_token or kv_elements_per_token")
        if e.kind == "linear_attention" and not (e.state_elements_per_request or e.state_bytes_per_request):
            raise InvalidSpec(source, f"layers.{i}.state_bytes_per_request",
                              "a linear-attention layer needs state_bytes_per_request or state_elements_per_request")
        params = e.params or 0
        act = e.activation_elements_per_token if e.activation_elements_per_token is not None else h
        out.append(Layer(
            name=name, kind=e.kind, index=dec if decoder else None,
            mixer=e.mixer or ({"attention": "gqa", "linear_attention": "kda"}.get(e.kind)),
            ffn=e.ffn, params_other=params, active_params=params,
            weight_bytes_fixed=e.weight_bytes, kv_elements_per_token=e.kv_elements_per_token,
            kv_bytes_per_token_fixed=e.kv_bytes_per_token, kv_window=e.kv_window,
            state_elements_per_request=e.state_elements_per_request,
            state_bytes_per_request_fixed=e.state_bytes_per_request,
            activation_elements_per_token=act, vocab_size=e.vocab_size or 0,
            tensors=tuple((k, tuple(v)) for k, v in (e.tensors or {}).items()),
            heads=tuple(e.heads) if e.heads else None))
        dec += decoder
    return out


def _dims(spec: dict) -> tuple[tuple[str, object], ...]:
    """A spec's dimensions as sorted (key, value) pairs: hashable, so layers stay frozen values."""
    return tuple(sorted(spec.items()))


class _Storage:
    """Stored formats of a spec's ``weight_storage``; inactive (no groups) when the spec has none."""

    def __init__(self, spec: ModelSpec, source: str):
        self.spec = spec.weight_storage
        self.source = source
        self.active = self.spec is not None
        self.formats: dict[str, WeightFormat] = {}
        if self.spec is not None:
            for name, f in self.spec.formats.items():
                d = f.model_dump(exclude={"method"})
                try:
                    self.formats[name] = WeightFormat(**d)
                except ValueError as exc:
                    raise InvalidSpec(source, f"weight_storage.formats.{name}", str(exc)) from None

    def _label(self, name: str) -> str:
        return f"{name} ({self.formats[name].label})"

    def groups(self, tensors: list[Tensor], storage: dict[str, list[str]], where: str) -> tuple[WeightGroup, ...]:
        """Group ``tensors`` by (role, format): linear weights matching a pattern of ``storage`` take
        that format (the first listed wins), every other tensor the default format."""
        if self.spec is None:
            if storage:
                raise InvalidSpec(self.source, f"{where}.storage", "needs weight_storage (the formats) in the spec")
            return ()
        for fmt in storage:
            if fmt not in self.formats:
                raise InvalidSpec(self.source, f"{where}.storage.{fmt}",
                                  f"unknown format (defined: {sorted(self.formats)})")
        used = {(fmt, pat): False for fmt, pats in storage.items() for pat in pats}
        acc: dict[tuple[str, str], list] = {}
        for t in tensors:
            fmt = self.spec.default
            if t.linear:
                for f, pats in storage.items():
                    hit = next((p for p in pats if fnmatchcase(t.name, p)), None)
                    if hit is not None:
                        fmt = f
                        used[(f, hit)] = True
                        break
            b = tensor_bytes(t.shape, self.formats[fmt], stacked=t.role == "experts")
            g = acc.setdefault((t.role, fmt), [0, 0, []])
            g[0] += t.numel
            g[1] += b
            g[2].append(t.name)
        unused = [p for (f, p), hit in used.items() if not hit]
        if unused:
            raise InvalidSpec(self.source, f"{where}.storage", f"pattern {unused[0]!r} matches no linear weight")
        return tuple(WeightGroup(role, fmt, self._label(fmt), p, b, self.formats[fmt], tuple(names))
                     for (role, fmt), (p, b, names) in acc.items())

    def groups_of_params(self, role: str, params: int, fmt: str | None, where: str) -> tuple[WeightGroup, ...]:
        """One group of ``params`` weights (a tower known by its count, norms) in ``fmt`` (default if None)."""
        if self.spec is None or not params:
            return ()
        fmt = fmt or self.spec.default
        if fmt not in self.formats:
            raise InvalidSpec(self.source, f"{where}.format", f"unknown format (defined: {sorted(self.formats)})")
        b = tensor_bytes((params,), self.formats[fmt])
        return (WeightGroup(role, fmt, self._label(fmt), params, b, self.formats[fmt]),)

    def embedding_groups(self, params: int, which: str) -> tuple[WeightGroup, ...]:
        fmt = getattr(self.spec, which, None) if self.spec is not None else None
        return self.groups_of_params(which, params, fmt, f"weight_storage.{which}")


def _layer_types(spec: ModelSpec, source: str, storage: _Storage) -> dict[str, Layer]:
    """One template :class:`Layer` per layer-type letter (name and index filled in per position)."""
    h = spec.hidden_size or 0
    built: dict[str, Layer] = {}
    for letter, lt in spec.layer_types.items():
        where = f"layer_types.{letter}"
        if len(letter) != 1 or not letter.isalpha():
            raise InvalidSpec(source, where, "layer type names are single letters")
        if lt.mixer is not None and lt.mixer not in spec.mixers:
            raise InvalidSpec(source, f"{where}.mixer", f"unknown mixer {lt.mixer!r} (defined: {sorted(spec.mixers)})")
        if lt.ffn is not None and lt.ffn not in spec.ffns:
            raise InvalidSpec(source, f"{where}.ffn", f"unknown ffn {lt.ffn!r} (defined: {sorted(spec.ffns)})")
        if lt.mixer is None and lt.ffn is None:
            raise InvalidSpec(source, where, "a layer needs a mixer, an ffn or both")
        ms = spec.mixers[lt.mixer] if lt.mixer is not None else None
        tensors: list[Tensor] = []
        mc = None
        md: dict = {}
        if ms is not None:
            md = ms.model_dump(exclude_none=True)
            try:
                mc = mixer_counts(md, h)
                tensors += mixer_tensors(md, h)
            except (KeyError, ZeroDivisionError) as exc:
                raise InvalidSpec(source, f"mixers.{lt.mixer}", f"incomplete dimensions ({exc})") from None
        fs = spec.ffns.get(lt.ffn) if lt.ffn else None
        fc = None
        fd: dict = {}
        if fs is not None and fs.params is None:
            fd = fs.model_dump(exclude_none=True)
            fc = ffn_counts(fd, h)
            tensors += ffn_tensors(fd, h)
        # one pre-norm of width h per sub-block (mixer, FFN) unless the spec says otherwise
        layer_norms = spec.norm_params_per_layer if spec.norm_params_per_layer is not None \
            else h * ((ms is not None) + (fs is not None))
        mixer_params = (ms.params if ms.params is not None else mc.params) if ms is not None else 0
        ffn_params = (fs.params if fs is not None and fs.params is not None else (fc.params if fc else 0))
        ffn_active = fc.active_params if fc else ffn_params
        if ms is None:
            kind, mixer_name = "ffn", None
        else:
            kind = "attention" if ms.type in ATTENTION_MIXERS else "linear_attention"
            mixer_name = "sliding" if ms.type in ("gqa", "mha") and ms.sliding_window else ms.type
        groups: tuple[WeightGroup, ...] = ()
        if storage.active or lt.storage:
            if lt.params is not None or (ms is not None and ms.params is not None) or (fs is not None and fs.params is not None):
                raise InvalidSpec(source, f"{where}.storage", "stored formats need tensors: give dimensions, not params")
            tensors.append(Tensor("norms", (layer_norms,), role="norm"))
            groups = storage.groups([t for t in tensors if t.numel], lt.storage, where)
        layer = Layer(
            name="", kind=kind, mixer=mixer_name, ffn=fs.type if fs is not None else None,
            params_mixer=mixer_params, params_ffn=ffn_params, params_other=layer_norms,
            active_params=mixer_params + ffn_active + layer_norms,
            kv_elements_per_token=(ms.kv_elements_per_token if ms.kv_elements_per_token is not None
                                   else mc.kv_elements_per_token) if ms is not None else 0,
            kv_window=mc.kv_window if mc else None,
            state_elements_per_request=(ms.state_elements_per_request
                                        if ms.state_elements_per_request is not None else mc.state_elements)
            if ms is not None else 0,
            conv_state_elements_per_request=(ms.conv_state_elements_per_request
                                             if ms.conv_state_elements_per_request is not None
                                             else mc.conv_state_elements) if ms is not None else 0,
            activation_elements_per_token=h,
            num_experts=fc.num_experts if fc else 0, expert_params=fc.expert_params if fc else 0,
            shared_params=fc.shared_params if fc else 0, weight_groups=groups,
            # dimensions only when the counts come from them (an override hides the tensors)
            mixer_dims=_dims(md) if ms is not None and ms.params is None and ms.kv_elements_per_token is None
            and ms.state_elements_per_request is None and ms.conv_state_elements_per_request is None else (),
            ffn_dims=_dims(fd) if fc is not None else ())
        if lt.params is not None:
            # The total is given: keep it exact, the mixer/FFN split is then unknown.
            active = lt.active_params if lt.active_params is not None else lt.params
            layer = replace(layer, params_mixer=0, params_ffn=0, params_other=lt.params,
                            active_params=active, num_experts=0, expert_params=0, shared_params=0,
                            mixer_dims=(), ffn_dims=())
        built[letter] = layer
    return built


def _compact_layers(spec: ModelSpec, source: str, built: dict[str, Layer]) -> list[Layer]:
    try:
        letters = parse_pattern(spec.pattern or "")
    except ValueError as exc:
        raise InvalidSpec(source, "pattern", str(exc)) from None
    if spec.num_layers is not None and len(letters) != spec.num_layers:
        raise InvalidSpec(source, "pattern",
                          f"pattern spells {len(letters)} layers but num_layers is {spec.num_layers}")
    out = []
    for i, letter in enumerate(letters):
        if letter not in built:
            raise InvalidSpec(source, "pattern", f"letter {letter!r} at layer {i} is not in layer_types")
        out.append(replace(built[letter], name=f"layers.{i}", index=i))
    return out


def _mtp_layers(spec: ModelSpec, source: str, built: dict[str, Layer], storage: _Storage) -> list[Layer]:
    """MTP layers: a decoder layer of ``mtp.layer_type`` plus the MTP's own projections and norms."""
    m = spec.mtp
    if m.layer_type is None or m.layer_type not in built:
        raise InvalidSpec(source, "mtp.layer_type", f"unknown layer type {m.layer_type!r} (defined: {sorted(built)})")
    base = built[m.layer_type]
    extra = storage.groups_of_params("mtp", m.extra_params, m.format, "mtp")
    out = []
    for k in range(m.count):
        out.append(replace(base, name=f"mtp.{k}", kind="mtp", index=None, params_other=base.params_other + m.extra_params,
                           active_params=base.active_params + m.extra_params,
                           weight_groups=base.weight_groups + extra))
    return out


def is_draft_node(layer: Layer) -> bool:
    """True for the nodes that draft tokens in speculative decoding: a multi-token-prediction
    layer (kind ``mtp``, or a part of one in split mode) or a draft model's node (named
    :data:`DRAFT_PREFIX` ...)."""
    whole = layer.parent or layer.name
    return layer.kind == "mtp" or (whole.startswith("mtp.") and layer.index is None) or whole.startswith(DRAFT_PREFIX)


def mtp_count(model: LayerGraph) -> int:
    """How many multi-token-prediction layers ``model`` places (whole layers, parts counted once)."""
    return len({x.parent or x.name for x in model.layers
                if (x.parent or x.name).startswith("mtp.") and x.index is None and x.kind != "embedding"})
