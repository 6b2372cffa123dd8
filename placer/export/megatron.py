"""Megatron-LM: the flags that build the mapping's layers on its pipeline ranks, release by release.

Two ways Megatron builds a decoder, and placer picks the one that builds the model's own layers:

* **GPT models** (``pretrain_gpt.py``): ``--pipeline-model-parallel-layout`` places layers per
  stage (``megatron/core/transformer/pipeline_parallel_layer_layout.py``): tokens ``E``
  (embedding), ``t`` (decoder layer), ``m`` (MTP), ``L`` (loss); ``|`` closes a stage, ``X*N``
  repeats, commas are cosmetic; the stage count is a multiple of the pipeline size, the decoder
  count equals ``--num-layers``. Layer kinds come from model flags: ``--multi-latent-attention``
  (MLA), ``--window-size`` / ``--window-attn-skip-freq`` (sliding-window layers among full ones),
  ``--num-experts`` / ``--moe-layer-freq`` (MoE layers), and, in 0.16, Gated DeltaNet through
  ``--experimental-attention-variant gated_delta_net --linear-attention-freq`` (1 = linear layer).
* **Hybrid models** (``pretrain_mamba.py``; ``pretrain_hybrid.py`` from 0.18): a layer pattern,
  one symbol per mixer and one per FFN (``megatron/core/ssm/mamba_hybrid_layer_allocation.py``,
  later ``megatron/core/models/hybrid/hybrid_layer_allocation.py``). The symbols by release:

  ======== ===================================================== ===========================
  release  symbols                                               flag, stage boundaries
  ======== ===================================================== ===========================
  0.16     ``M`` Mamba-2, ``*`` attention, ``-`` MLP, ``E`` MoE   ``--hybrid-override-pattern``;
                                                                 no ``|``: an even split, or
                                                                 first / last stage counts
  0.17     + ``G`` Gated DeltaNet                                 ``--hybrid-layer-pattern``, ``|``
  0.18     + ``D`` DeepSeek sparse attention                      same
  0.19     + ``+`` MLA (``*`` and ``+`` never in one model)       same
  ======== ===================================================== ===========================

  With a hybrid pattern, ``--pipeline-model-parallel-layout`` and the account-for flags are
  refused by Megatron's argument validation ("should not be used with --hybrid-layer-pattern").

Megatron has no KDA, lightning-attention or Mamba-1 layer (its ``M`` builds the Mamba-2 mixer of
``megatron/core/ssm/mamba_mixer.py``): such a model is refused naming the layer kind (Mamba-1 is
exported as ``M`` only with ``--force``).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from placer.export.command import header, plan_limits, target_version
from placer.export.stages import (
    Export,
    ExportOptions,
    ExportRefused,
    RuntimeRank,
    runtime_stages,
    uniform_degree,
)
from placer.export.support import version_tuple
from placer.mapping.view import MappingView
from placer.specs.model import LayerGraph

__all__ = ["MegatronRelease", "megatron_release", "layout_string", "parse_layout", "hybrid_pattern",
           "parse_hybrid_pattern", "uneven_split_flags", "export_megatron", "megatron_flags"]

_LAYOUT_TOKENS = {"E": "embedding", "L": "loss", "t": "decoder", "m": "mtp"}
_FFN_SYMBOL = {"dense": "-", "moe": "E"}
_NO_LAYER = {"kda": "Kimi Delta Attention (KDA)", "lightning": "lightning attention"}


@dataclass(frozen=True)
class MegatronRelease:
    """What one Megatron-LM release's hybrid pattern accepts."""

    version: str
    mixer_symbols: dict            # placer mixer type -> hybrid-pattern symbol
    pipe: bool                     # '|' stage separators
    pattern_flag: str
    hybrid_entry: str

    @property
    def valid_symbols(self) -> set[str]:
        return set(self.mixer_symbols.values()) | set(_FFN_SYMBOL.values())


def megatron_release(version: str) -> MegatronRelease:
    """The hybrid-pattern rules of megatron-core ``version`` (``"main"``: the newest)."""
    v = (10**6,) if version == "main" else version_tuple(version)
    if v < (0, 16):
        raise ExportRefused("--runtime-version", "runtime_version",
                            f"Megatron-LM {version}: placer exports for 0.16 and later")
    symbols = {"mamba2": "M", "gqa": "*", "mha": "*"}
    if v >= (0, 17):
        symbols["gated_deltanet"] = "G"
    if v >= (0, 19):
        symbols["mla"] = "+"
    return MegatronRelease(version=version, mixer_symbols=symbols, pipe=v >= (0, 17),
                           pattern_flag="--hybrid-layer-pattern" if v >= (0, 17) else "--hybrid-override-pattern",
                           hybrid_entry="pretrain_hybrid.py" if v >= (0, 18) else "pretrain_mamba.py")


# ----------------------------------------------------------------------------- layout (GPT models)
def layout_string(counts: list[int]) -> str:
    """``E t*c0 | t*c1 | ... | t*cN L`` without spaces: ``[23, 24, 24, 23]`` -> ``Et*23|t*24|t*24|t*23L``."""
    parts = []
    for k, c in enumerate(counts):
        body = "t" if c == 1 else (f"t*{c}" if c > 1 else "")
        parts.append(("E" if k == 0 else "") + body + ("L" if k == len(counts) - 1 else ""))
    return "|".join(parts)


def parse_layout(text: str, pp_size: int, num_layers: int) -> list[int]:
    """Decoder layers per stage as Megatron reads ``text``; ``ValueError`` where Megatron would assert."""
    s = text.replace(",", "")
    s = re.sub(r"\(([^)]+)\)\*(\d+)", lambda m: m.group(1) * int(m.group(2)), s)
    s = re.sub(r"(.)\*(\d+)", lambda m: m.group(1) * int(m.group(2)), s)
    stages = []
    for stage in s.split("|"):
        for ch in stage:
            if ch not in _LAYOUT_TOKENS:
                raise ValueError(f"Invalid layer character: {ch} (known: {list(_LAYOUT_TOKENS)})")
        stages.append(stage)
    if len(stages) % pp_size != 0:
        raise ValueError(f"pipeline_model_parallel_layout must be divisible by pipeline_model_parallel_size "
                         f"({len(stages)=}, {pp_size=})")
    flat = "".join(stages)
    if not flat or flat[0] != "E":
        raise ValueError("The first layer must be embedding")
    if flat[-1] != "L":
        raise ValueError("The last layer must be loss")
    if flat.count("E") != 1 or flat.count("L") != 1:
        raise ValueError("Embedding and loss must each be specified exactly once")
    if flat.count("t") != num_layers:
        raise ValueError(f"Number of decoder layers {flat.count('t')} must match num_layers {num_layers}")
    return [stage.count("t") for stage in stages]


# ----------------------------------------------------------------------------- hybrid pattern
def _layer_symbols(kind: str, mixer: str | None, ffn: str | None, release: MegatronRelease, force: bool) -> str:
    # an explicit-form attention layer names no mixer: standard attention
    sym = "*" if kind == "attention" and mixer is None else release.mixer_symbols.get(mixer or "")
    if kind == "ffn" and mixer is None and ffn in _FFN_SYMBOL:
        sym = ""                                   # a layer of an FFN alone (Nemotron-H's - and E)
    if sym is None and mixer == "mamba" and force:
        sym = "M"
    if sym is None:
        raise ValueError(f"mixer {mixer!r}" if mixer else f"a {kind} layer whose spec names no mixer type")
    return sym + _FFN_SYMBOL.get(ffn or "", "")


def hybrid_pattern(ranks: list[RuntimeRank], release: MegatronRelease, force: bool = False) -> list[str]:
    """One pattern segment per rank: a mixer symbol and an FFN symbol (when the layer has one) per layer."""
    return ["".join(_layer_symbols(k, m, f, release, force) for k, m, f in zip(r.kinds, r.mixers, r.ffns))
            for r in ranks]


def parse_hybrid_pattern(text: str, pp_size: int, release: MegatronRelease) -> list[int]:
    """Symbols per stage of a hybrid pattern as ``release`` reads it; ``ValueError`` where it refuses.

    With ``|`` (0.17 and later) the segments are the stages; without (0.16) the caller splits
    the symbols with :func:`uneven_split_flags`.
    """
    if "|" in text and not release.pipe:
        raise ValueError(f"In hybrid override pattern, '|' is not one of {release.valid_symbols}")
    segments = text.split("|")
    if release.pipe and len(segments) % pp_size != 0:
        raise ValueError(f"The number of hybrid pipeline segments described by {release.pattern_flag} must be "
                         f"divisible by the pipeline size: {len(segments)} segments, pp {pp_size}")
    for seg in segments:
        for ch in seg:
            if ch not in release.valid_symbols:
                raise ValueError(f"'{ch}' is not a valid layer symbol (valid: {sorted(release.valid_symbols)})")
        if "*" in seg and "+" in seg:
            raise ValueError("Not supported to have both Attention and MLA/DSA in one model")
    return [len(seg) for seg in segments]


def uneven_split_flags(symbol_counts: list[int]) -> dict[str, int] | None:
    """Megatron 0.16's hybrid split without ``|``: ``{}`` (even), first / last stage counts, or None.

    It mirrors ``MambaStack._select_layers_for_pipeline_parallel``: the first and last stages take
    ``--decoder-first/last-pipeline-num-layers`` symbols when given, the stages between an equal
    share of the rest (integer division).
    """
    pp, total = len(symbol_counts), sum(symbol_counts)
    candidates: list[dict[str, int]] = [{}]
    if pp >= 2:
        candidates += [{"first": symbol_counts[0]}, {"last": symbol_counts[-1]},
                       {"first": symbol_counts[0], "last": symbol_counts[-1]}]
    for flags in candidates:
        first, last = flags.get("first"), flags.get("last")
        if not flags:
            if total % pp == 0 and all(c == total // pp for c in symbol_counts):
                return {}
            continue
        middle_stages = pp - len(flags)
        rest = total - (first or 0) - (last or 0)
        per = rest // middle_stages if middle_stages > 0 else 0
        built = ([first] if first is not None else []) + [per] * middle_stages + ([last] if last is not None else [])
        if built == symbol_counts and (middle_stages == 0 or rest % middle_stages == 0) and min(built) > 0:
            return flags
    return None


# ----------------------------------------------------------------------------- the export
def _refuse_kinds(ranks: list[RuntimeRank], release: MegatronRelease, force: bool, source: str) -> None:
    by_mixer: dict[str, list[int]] = {}
    for r in ranks:
        for i, m in zip(r.decoder, r.mixers):
            by_mixer.setdefault(m or "unknown", []).append(i)
    for mixer, what in _NO_LAYER.items():
        if mixer in by_mixer:
            idx = by_mixer[mixer]
            raise ExportRefused(source, "/model", f"Megatron-LM {release.version} has no {what} layer "
                                                  f"({len(idx)} layers: layers.{idx[0]}, ...); no symbol or flag "
                                                  "builds it")
    if "mamba" in by_mixer and not force:
        idx = by_mixer["mamba"]
        raise ExportRefused(source, "/model", f"Megatron-LM {release.version} has no Mamba-1 layer ({len(idx)} layers: "
                                              f"layers.{idx[0]}, ...): its M builds a Mamba-2 mixer "
                                              "(megatron/core/ssm/mamba_mixer.py); --force exports them as M")


def _list_flag(values: list[int]) -> str:
    return "[" + ",".join(map(str, values)) + "]"


def megatron_flags(view: MappingView, graph: LayerGraph, ranks: list[RuntimeRank], release: MegatronRelease,
                   options: ExportOptions, source: str) -> tuple[str, list[str], str, list[str]]:
    """(entry point, flags, bare value, notes): the arguments Megatron needs for this mapping."""
    pp = len(ranks)
    mixers = [m for r in ranks for m in r.mixers]
    ffns = [f for r in ranks for f in r.ffns]
    kinds = [k for r in ranks for k in r.kinds]
    _refuse_kinds(ranks, release, options.force, source)
    tp = uniform_degree(ranks, "tensor_parallel", "Megatron-LM", "--tensor-model-parallel-size", source,
                        " (one tensor-parallel group size for the whole pipeline; solve without --per-stage-tp)")
    ep = uniform_degree(ranks, "expert_parallel", "Megatron-LM", "--expert-model-parallel-size", source)
    par = (["--tensor-model-parallel-size", str(tp)] if tp > 1 else []) + \
          (["--expert-model-parallel-size", str(ep)] if ep > 1 else [])
    limits = plan_limits(view, source)
    common = ["--hidden-size", str(graph.hidden_size)] if graph.hidden_size else []
    common += ["--seq-length", str(limits.context_tokens)]
    linear = {m for m, k in zip(mixers, kinds) if k == "linear_attention"}
    notes: list[str] = []
    gpt_gdn = linear == {"gated_deltanet"} and "gated_deltanet" not in release.mixer_symbols
    if linear and not gpt_gdn:
        # a hybrid pattern builds every layer
        if any(m in ("sliding",) for m in mixers):
            raise ExportRefused(source, "/model", f"Megatron-LM {release.version}'s hybrid pattern has no "
                                                  "sliding-window attention symbol")
        if "mla" in mixers and "mla" not in release.mixer_symbols:
            raise ExportRefused(source, "/model", f"Megatron-LM {release.version}'s hybrid pattern has no MLA symbol "
                                                  "(+ arrives in 0.19): target --runtime-version 0.19 or later")
        empty = [r for r in ranks if r.count == 0]
        if empty:
            raise ExportRefused(source, f"/stages/{empty[0].index}",
                                f"stage {empty[0].index} holds no decoder layer; a hybrid layer pattern cannot "
                                "express an empty pipeline stage")
        try:
            segments = hybrid_pattern(ranks, release, options.force)
        except ValueError as exc:
            raise ExportRefused(source, "/model", f"Megatron-LM {release.version}'s hybrid pattern has no symbol "
                                                  f"for {exc}") from None
        if release.pipe:
            pattern = "|".join(segments)
            try:
                counts = parse_hybrid_pattern(pattern, pp, release)
            except ValueError as exc:
                raise ExportRefused(source, "/stages", f"Megatron-LM would reject {pattern!r}: {exc}") from None
            if counts != [len(s) for s in segments]:
                raise ExportRefused(source, "/stages", f"hybrid pattern reads back as {counts}")
            flags = ["--pipeline-model-parallel-size", str(pp), *par, release.pattern_flag, pattern]
        else:
            pattern = "".join(segments)
            split = uneven_split_flags([len(s) for s in segments])
            if split is None:
                raise ExportRefused(source, "/stages",
                                    f"Megatron-LM {release.version} splits a hybrid pattern evenly or with only the first "
                                    f"and last stages different (no '|' before 0.17); this mapping's stages hold "
                                    f"{rank_list_counts(segments)} symbols: target --runtime-version 0.17 or later")
            parse_hybrid_pattern(pattern, pp, release)
            flags = ["--pipeline-model-parallel-size", str(pp), *par, "--num-layers", str(len(pattern)),
                     release.pattern_flag, pattern]
            if "first" in split:
                flags += ["--decoder-first-pipeline-num-layers", str(split["first"])]
            if "last" in split:
                flags += ["--decoder-last-pipeline-num-layers", str(split["last"])]
        notes.append(f"hybrid model: {len(pattern) - pattern.count('|')} pattern symbols (one per mixer and per FFN) "
                     "are Megatron's layers; no --pipeline-model-parallel-layout with a hybrid pattern")
        return release.hybrid_entry, flags + common, pattern, notes
    # a GPT model with a layout
    counts = [r.count for r in ranks]
    layout = layout_string(counts)
    try:
        parsed = parse_layout(layout, pp, graph.num_hidden_layers)
    except ValueError as exc:
        raise ExportRefused(source, "/stages", f"Megatron-LM would reject layout {layout!r}: {exc}") from None
    if parsed != counts:
        raise ExportRefused(source, "/stages", f"layout {layout!r} reads back as {parsed}, expected {counts}")
    flags = ["--num-layers", str(graph.num_hidden_layers), "--pipeline-model-parallel-size", str(pp), *par,
             "--pipeline-model-parallel-layout", layout]
    attn = [m for m, k in zip(mixers, kinds) if k == "attention"]
    if "mla" in attn:
        if set(attn) != {"mla"}:
            raise ExportRefused(source, "/model", "Megatron-LM builds MLA on every attention layer or none; this model "
                                                  "mixes MLA with other attention")
        flags.append("--multi-latent-attention")
    if "sliding" in attn:
        windows = {x.kv_window for x in graph.layers if x.index is not None and x.mixer == "sliding"}
        if len(windows) != 1 or None in windows:
            raise ExportRefused(source, "/model", "sliding-window layers with different windows")
        flags += ["--window-size", f"{windows.pop()},0",
                  "--window-attn-skip-freq", _list_flag([int(m == "sliding") for m, k in zip(mixers, kinds)])]
    if gpt_gdn:
        flags += ["--experimental-attention-variant", "gated_delta_net",
                  "--linear-attention-freq", _list_flag([int(k == "linear_attention") for k in kinds])]
    if "moe" in ffns:
        experts = {x.num_experts for x in graph.layers if x.index is not None and x.ffn == "moe"}
        if len(experts) != 1:
            raise ExportRefused(source, "/model", "MoE layers with different expert counts")
        flags += ["--num-experts", str(experts.pop()), "--moe-layer-freq", _list_flag([int(f == "moe") for f in ffns])]
    return "pretrain_gpt.py", flags + common, layout, notes


def rank_list_counts(segments: list[str]) -> str:
    counts = [len(s) for s in segments]
    return ",".join(map(str, counts[:12])) + (",..." if len(counts) > 12 else "")


def export_megatron(view: MappingView, graph: LayerGraph, source: str = "<mapping>",
                    options: ExportOptions = ExportOptions()) -> Export:
    """Megatron-LM arguments for ``view``, or (``bare``) the layout string / hybrid pattern alone."""
    version = target_version("megatron", options)
    release = megatron_release(version)
    ranks = runtime_stages(view, graph, "Megatron-LM", source)
    entry, flags, value, notes = megatron_flags(view, graph, ranks, release, options, source)
    warnings = []
    if options.force and any(m == "mamba" for r in ranks for m in r.mixers):
        warnings.append("Mamba-1 layers exported as M, which Megatron builds as Mamba-2 mixers (--force)")
    if options.bare:
        return Export(text=value, warnings=tuple(warnings))
    lines = header(view, "Megatron-LM", version, len(ranks), options)
    lines.append(f"# entry point: {entry}; sizes not set here (heads, FFN widths, vocabulary) come from the "
                 "checkpoint's conversion")
    lines += [f"# {n}" for n in notes]
    pairs: list[str] = []
    k = 0
    while k < len(flags):
        if k + 1 < len(flags) and not flags[k + 1].startswith("--"):
            pairs.append(f"{flags[k]} {shlex.quote(flags[k + 1])}")
            k += 2
        else:
            pairs.append(flags[k])
            k += 1
    lines.append(" \\\n".join(pairs))
    return Export(text="\n".join(lines), warnings=tuple(warnings))

