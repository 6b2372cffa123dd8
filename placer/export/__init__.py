"""Exporters: a stage mapping in the formats serving and training runtimes read.

``export_mapping(doc, "vllm")`` validates the mapping against its specs (refusing an invalid or
stale one), checks the runtime release runs the model (:mod:`.support`), then builds the
runtime's form and parses it back with the runtime's own rules before returning it. Formats:
``vllm`` / ``sglang`` (the launch command with the partition variable), ``megatron`` (the flags:
layout string or hybrid pattern, layer kinds), ``torch`` (a ``torch.distributed.pipelining``
script), ``json`` (placer's executor manifest). ``ExportOptions(bare=True)`` gives the runtime's
value alone (partition string, layout / pattern, split points as JSON). A two-pool mapping
exports each pool with the runtime's prefill/decode flags (:mod:`.pools`); a fleet mapping each
model's pipelines (:mod:`.fleet`).
"""

from __future__ import annotations

from placer.export.manifest import export_manifest
from placer.export.megatron import export_megatron
from placer.export.sglang import export_sglang
from placer.export.stages import Export, ExportOptions, ExportRefused
from placer.export.torch import export_torch
from placer.export.vllm import export_vllm
from placer.mapping import specs_from_mapping
from placer.mapping.view import FleetView, PooledView, mapping_view
from placer.problem.reductions.refine import refine

__all__ = ["FORMATS", "ATTENTION_DP_FORMATS", "Export", "ExportOptions", "ExportRefused", "export_mapping"]

FORMATS = {
    "vllm": export_vllm,
    "sglang": export_sglang,
    "megatron": export_megatron,
    "torch": export_torch,
    "json": export_manifest,
}
# the formats whose runtimes run attention data parallelism (placer.problem.reductions.attention_dp): SGLang's
# --attn-dp-size, vLLM's --data-parallel-size with --enable-expert-parallel
ATTENTION_DP_FORMATS = ("vllm", "sglang")


def export_mapping(doc, fmt: str, *, model=None, fleet=None, source: str = "<mapping>",
                   options: ExportOptions | None = None) -> Export:
    """``doc`` (a mapping document, or its :func:`~placer.mapping.view.mapping_view`) in format ``fmt``
    (a key of :data:`FORMATS`), as ``options`` ask (default: the command).

    Raises :class:`ExportRefused` (an :class:`~placer.specs.errors.InvalidSpec`) when the mapping has
    violations or the runtime cannot express it, naming the reason.
    """
    from placer.mapping.validate import validate_mapping

    if fmt not in FORMATS:
        raise ExportRefused("--format", "format", f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
    view = mapping_view(doc, source)
    if isinstance(view, FleetView):
        from placer.export.fleet import export_fleet

        return export_fleet(view, fmt, export_mapping, source=source, options=options)
    if isinstance(view, PooledView):
        from placer.export.pools import export_pooled

        return export_pooled(view, fmt, export_mapping, model=model, source=source, options=options)
    base, fl, _ = specs_from_mapping(view.doc, model=model, hardware=fleet)
    violations = validate_mapping(view, model=base, fleet=fl, source=source)
    if violations:
        first = violations[0]
        raise ExportRefused(source, "-", f"the mapping has {len(violations)} violation(s) (first: {first}); "
                                         "run `placer validate` and re-solve before exporting")
    if view.parallel.attention_dp and fmt not in ATTENTION_DP_FORMATS:
        raise ExportRefused(source, "/parallel/attention_dp",
                            f"{fmt} has no attention data parallelism (each stage's ranks splitting its requests); "
                            f"export to {' or '.join(ATTENTION_DP_FORMATS)}, or re-solve with --no-attention-dp")
    graph = base
    if view.mode == "split":
        graph = refine(base, view.model.granularity, expert_groups=view.model.expert_groups)
    options = _with_tier(options or ExportOptions(), fl, view)
    result = FORMATS[fmt](view, graph, source, options)
    if options.tier is not None and fmt not in ("vllm", "sglang"):
        from dataclasses import replace

        result = replace(result, warnings=tuple(result.warnings) + (
            f"{fmt} has no KV offloading setting: the {options.tier} tier is not exported",))
    return result


def _with_tier(options: ExportOptions, fleet, view) -> ExportOptions:
    """``options`` with the tier the mapping's session plan chose (its ``sessions`` record:
    :mod:`placer.mapping.tiers`) unless ``--tier`` names one, and its bytes per GPU: ``--tier-size``,
    else the plan's for its own tier, else the hardware spec's (an error when the plan's devices have
    no such tier)."""
    from dataclasses import replace

    from placer.specs.tiers import tier_of

    rec = view.doc.get("sessions") or {}
    if options.tier is None and rec.get("tier") is not None:
        options = replace(options, tier=rec["tier"])
    if options.tier is not None and options.tier == rec.get("tier") and options.tier_bytes is None:
        options = replace(options, tier_bytes=rec["tier_bytes_per_device"])
    if options.tier is None or options.tier_bytes is not None:
        return options
    by_id = fleet.by_id
    types = {by_id[d].type for d in view.route if d in by_id} or {d.type for d in fleet.devices}
    tiers = [tier_of(t, options.tier) for t in types]
    if any(t is None for t in tiers):
        raise ExportRefused("--tier", "tier", f"the hardware spec {fleet.name} gives its devices no {options.tier!r} "
                                              "tier (a device's tiers: list)")
    return replace(options, tier_bytes=min(t.capacity_bytes for t in tiers))
