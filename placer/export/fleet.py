"""Fleet mappings (several models on one fleet, :mod:`placer.mapping.fleet_mapping`) in a runtime's
form: one command (or config) per pipeline of each model, each its one-pool export (validated,
the runtime's own parser run on it), under a header naming the model and the replica, after the
fleet as a whole validated (no device shared unless allowed, shared bytes within memory)."""

from __future__ import annotations

import json

from placer.export.stages import Export, ExportOptions, ExportRefused
from placer.mapping.view import FleetView

__all__ = ["export_fleet"]


def export_fleet(view: FleetView, fmt: str, export_one, *, source: str = "<mapping>",
                 options: ExportOptions | None = None) -> Export:
    """Every pipeline of ``view`` in format ``fmt``; ``export_one(pipeline_view, fmt, source=,
    options=)`` exports one (:func:`placer.export.export_mapping`). ``json``: one object with each
    model's manifests; other formats: the commands one after another, each under its header."""
    from placer.mapping.validate import validate_mapping

    violations = validate_mapping(view, source=source)
    if violations:
        raise ExportRefused(source, "-", f"the mapping has {len(violations)} violation(s) (first: {violations[0]}); "
                                         "run `placer validate` and re-plan before exporting")
    parts = [(m, r, export_one(p, fmt, source=source, options=options))
             for m in view.models for r, p in enumerate(m.pipelines)]
    warnings = tuple(f"{m.name} replica {r}: {w}" for m, r, e in parts for w in e.warnings)
    if fmt == "json":
        doc = {"kind": "fleet", "models": [
            {"name": m.name, "model": m.model,
             "pipelines": [json.loads(e.text) for mm, _r, e in parts if mm is m]} for m in view.models]}
        return Export(text=json.dumps(doc, indent=2), warnings=warnings)
    lines = [f"# {len(view.models)} model(s) on {view.hardware['name']}: one command per pipeline, each on its "
             f"own devices"]
    for m, r, e in parts:
        devices = sorted({d for st in m.pipelines[r].stages for d in st.devices})
        lines.append(f"# {m.name} ({m.model}) replica {r}: {len(devices)} device(s)")
        lines.append(e.text)
    return Export(text="\n".join(lines), warnings=warnings)
