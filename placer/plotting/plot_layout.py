"""A picture of a stage mapping on its fleet: racks, devices, memory, and the path a token takes."""

from __future__ import annotations

import math
import re

from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.patches import FancyArrowPatch, Patch, Rectangle

from placer.mapping.view import MappingStage

__all__ = ["plot_layout", "KIND_COLORS", "MEMORY_COLORS"]

KIND_COLORS = {
    "attention": "#e4572e",         # dense (full-attention) layers: KV cache grows with context
    "linear_attention": "#3b7dd8",  # linear-attention layers: fixed state per request
    "ffn": "#8f6bb3",
    "embedding": "#4c9f70",
    "lm_head": "#4c9f70",
    "other": "#9a9a9a",
}
KIND_LABELS = {"attention": "full attention", "linear_attention": "linear attention", "ffn": "FFN / experts",
               "embedding": "embedding / head", "other": "other"}
MEMORY_COLORS = {"weights": "#2f3e4e", "kv_reserve": "#f4a259", "state": "#8cc084",
                 "activations": "#c879ff", "reserve": "#a8a8a8", "free": "#ffffff"}
MEMORY_LABELS = {"weights": "weights", "kv_reserve": "KV reserve", "state": "state",
                 "activations": "activations", "reserve": "runtime reserve", "free": "free"}
UNUSED_COLOR = "#e6e6e6"
GROUP_COLOR = "#111111"
_ID = re.compile(r"^r(\d+)([a-z])(\d+)$")


def _fleet_devices(doc: dict, stages: list[MappingStage], fleet) -> list[tuple[str, int, int, bool]]:
    """(id, rack, slot, available) of every device to draw."""
    if fleet is None:
        try:
            from placer.specs.fleet import load_fleet

            fleet = load_fleet(doc["hardware"]["name"])
        except Exception:  # a hand-written mapping may name hardware placer does not know
            fleet = None
    devices = [] if fleet is None else [(d.id, d.rack, d.slot, d.available) for d in fleet.devices]
    known = {d[0] for d in devices}
    used = [s.device for s in stages] + list(doc.get("route", [])) + [m for s in stages for m in s.devices]
    extra = list(dict.fromkeys(d for d in used if d not in known))
    parsed = {d: _ID.match(str(d)) for d in extra}
    named = [m for m in parsed.values() if m is not None]
    if named:
        # ids beyond the fleet (none known, or a resized one): racks up to the highest seen, each
        # filled to the widest rack, so unused devices show too
        letter = named[0].group(2)
        racks = max([int(m.group(1)) for m in named] + [d[1] for d in devices]) + 1
        slots = max([int(m.group(3)) for m in named] + [d[2] for d in devices]) + 1
        have = {(d[1], d[2]) for d in devices}
        devices += [(f"r{r}{letter}{s}", r, s, True) for r in range(racks) for s in range(slots)
                    if (r, s) not in have and (fleet is None or r > max(d.rack for d in fleet.devices))]
        known = {d[0] for d in devices}
    odd = [d for d in extra if d not in known]
    next_rack = max((d[1] for d in devices), default=-1) + 1
    for i, d in enumerate(odd):   # ids that follow no naming scheme: one extra rack of their own
        devices.append((d, next_rack, i, True))
    return devices


def _parse_id(device: str):
    m = _ID.match(str(device))
    return None if m is None else (int(m.group(1)), int(m.group(3)), device)


def _kind_of(name, kinds_by_name: dict[str, str]) -> str | None:
    """Kind of a node name; refined names (``layers.3.shard1``, ``.mixer``, ``.experts.2``) by their layer."""
    if not isinstance(name, str):
        return None
    if name in kinds_by_name:
        return kinds_by_name[name]
    if name in ("embedding", "lm_head"):
        return name
    m = re.match(r"^(layers\.\d+)(\.(ffn|experts\.\d+))?", name)
    if m is None:
        return None
    if m.group(2):
        return "ffn"
    return kinds_by_name.get(m.group(1))


def _stage_kinds(stage: MappingStage, kinds_by_name: dict[str, str]) -> list[str]:
    """Kind of every layer on a stage: from the model when known, else from the stage's bytes."""
    out = [_kind_of(name, kinds_by_name) for name in stage.layers]
    if any(k is None for k in out):
        b = stage.bytes
        guess = "attention" if b.kv_reserve else "linear_attention" if b.state else "other"
        out = [guess if k is None else k for k in out]
    return out or ["other"]


def _model_kinds(doc: dict, model) -> dict[str, str]:
    if model is None:
        try:
            from placer.specs.model import load_model

            model = load_model(doc["model"]["name"])
        except Exception:  # unknown model: kinds come from the stages' bytes
            return {}
    return {x.name: x.kind for x in model.layers}


_ENDS = {"embedding": "emb", "lm_head": "head"}


def _short_range(names: list[str]) -> str:
    """'L3-4' for layers.3 and layers.4 (with 'emb+' / '+head' for the embedding and the LM head);
    the first and last name otherwise."""
    head = [n for n in names if n in _ENDS]
    body = [n for n in names if n not in _ENDS]
    if head and body:
        inner = _short_range(body)
        before = "emb+" if "embedding" in head else ""
        after = "+head" if "lm_head" in head else ""
        return f"{before}{inner}{after}"
    if head:
        return "+".join(_ENDS[n] for n in head)
    idx = []
    for n in names:
        m = re.match(r"^layers\.(\d+)", n)
        idx.append(int(m.group(1)) if m else None)
    if names and all(i is not None for i in idx):
        uniq = sorted(set(idx))
        lo, hi = uniq[0], uniq[-1]
        if lo == hi:
            return f"L{lo}"
        if uniq == list(range(lo, hi + 1)):
            return f"L{lo}-{hi}"
        return "L" + ",".join(map(str, uniq)) if len(uniq) <= 3 else f"L{lo}..{hi} ({len(uniq)})"
    if not names:
        return ""
    return names[0] if len(names) == 1 else f"{names[0]}..{names[-1]}"


def plot_layout(doc: dict, ax: Axes | None = None, *, fleet=None, model=None, racks_per_row: int | None = None,
                title: str | None = None, show_path: bool = True) -> Axes:
    """Draw a stage mapping (the JSON document of ``placer solve``, or a hand-written sketch of one:
    its stages as :meth:`~placer.mapping.view.MappingStage.sketched` reads them) on its fleet.

    Racks are groups of device boxes; a used device is tinted by the layer kinds it holds (one
    band per kind, in proportion to its layers), carries a stacked bar of its memory (weights /
    KV reserve / state / activations / runtime reserve / free) and its stage number and layers; unused and
    unavailable devices are grey. Arrows follow the route a token takes between devices. The
    fleet comes from ``fleet``, else the catalog entry named in the mapping, else the device ids;
    layer kinds from ``model``, else the catalog model, else the stage's bytes (KV reserve means
    full attention, state means linear attention). A stage on a group of devices (tensor / expert
    parallel) is drawn as one box around its members, gid ``group:<first member>``, its label
    ending in ``tpG`` (and ``epG``); every member carries its own memory bar (each holds the stage's
    per-device bytes), the first also the stage's bands and label. Each device box is a patch whose
    gid is ``device:<id>``. Returns the axes.
    """
    import matplotlib.pyplot as plt

    drawn = [MappingStage.sketched(st, k) for k, st in enumerate(doc.get("stages", []))]
    devices = _fleet_devices(doc, drawn, fleet)
    kinds_by_name = _model_kinds(doc, model)
    stages = {s.device: s for s in drawn}
    member_of = {m: s for s in drawn for m in s.devices[1:] if m not in stages}
    racks = sorted({d[1] for d in devices})
    per_rack = max((sum(1 for d in devices if d[1] == r) for r in racks), default=1)
    n_racks = len(racks)
    if racks_per_row is None:
        racks_per_row = max(1, min(n_racks, math.ceil(math.sqrt(n_racks * 2.2 * per_rack / 3))))
    rows = math.ceil(n_racks / racks_per_row)
    # as many racks on every row as the rows allow: no near-empty last row (8 racks: 4 + 4, not 7 + 1)
    racks_per_row = math.ceil(n_racks / rows)
    box_w, box_h = 1.0, 0.78
    rack_w, rack_h = box_w + 0.3, per_rack * (box_h + 0.12) + 0.4
    if ax is None:
        fig_w = max(6.0, 1.35 * racks_per_row + 1.5)
        fig_h = max(3.5, rows * rack_h * 0.95 + 1.6)
        _, ax = plt.subplots(figsize=(fig_w, fig_h), dpi=110)
    rack_pos = {r: ((i % racks_per_row) * (rack_w + 0.25), -(i // racks_per_row) * (rack_h + 0.35))
                for i, r in enumerate(racks)}
    slot_rank = {}
    for r in racks:
        for j, d in enumerate(sorted((d for d in devices if d[1] == r), key=lambda d: d[2])):
            slot_rank[d[0]] = j
    centers = {}
    boxes: dict[str, tuple[float, float]] = {}    # device id -> lower-left corner of its box
    labels = []         # (text, left, right): stage labels to fit inside their box
    font = 6.5 if racks_per_row >= 8 else 8
    for r in racks:
        x0, y0 = rack_pos[r]
        ax.add_patch(Rectangle((x0, y0 - rack_h), rack_w, rack_h, facecolor="#fafafa", edgecolor="#b0b0b0",
                               lw=0.8, gid=f"rack:{r}", zorder=0))
        ax.text(x0 + rack_w / 2, y0 - 0.16, f"rack {r}", ha="center", va="center", fontsize=font, color="#555")
    for did, r, _slot, available in devices:
        x0, y0 = rack_pos[r]
        bx = x0 + 0.15
        by = y0 - 0.32 - (slot_rank[did] + 1) * (box_h + 0.12) + 0.12
        centers[did] = (bx + box_w / 2, by + box_h / 2)
        stage = stages.get(did)
        member = member_of.get(did)
        used = stage is not None or member is not None
        box = Rectangle((bx, by), box_w, box_h, facecolor="white" if used else UNUSED_COLOR,
                        edgecolor="#333" if used else "#c8c8c8", lw=0.9 if used else 0.6,
                        hatch=None if available else "////", gid=f"device:{did}", zorder=1)
        ax.add_patch(box)
        boxes[did] = (bx, by)
        if not used:
            ax.text(bx + box_w / 2, by + box_h / 2, did if available else f"{did}\nunavailable",
                    ha="center", va="center", fontsize=font - 1, color="#a0a0a0", zorder=2)
            continue
        if member is not None:         # a group member after the first: its memory bar and id
            _memory_bar(ax, member, bx, by, box_w, box_h)
            ax.text(bx + box_w / 2, by + box_h * 0.62, did, ha="center", va="center", fontsize=font - 1,
                    color="#333", zorder=3)
            continue
        # kind bands across the top of the box
        kinds = _stage_kinds(stage, kinds_by_name)
        band_h = box_h * 0.3
        x = bx
        for kind in dict.fromkeys(kinds):
            w = box_w * kinds.count(kind) / len(kinds)
            ax.add_patch(Rectangle((x, by + box_h - band_h), w, band_h, lw=0,
                                   facecolor=KIND_COLORS.get(kind, KIND_COLORS["other"]), zorder=2))
            x += w
        label = ax.text(bx + box_w / 2, by + box_h - band_h / 2,
                        f"s{stage.index} {_short_range(list(stage.layers))}{_degrees(stage)}",
                        ha="center", va="center", fontsize=font, color="white", fontweight="bold", zorder=3,
                        gid=f"label:{did}")
        labels.append((label, bx, bx + box_w))
        _memory_bar(ax, stage, bx, by, box_w, box_h)
        ax.text(bx + box_w / 2, by + box_h * 0.5, did, ha="center", va="center", fontsize=font - 1,
                color="#333", zorder=3)
    grouped = _draw_groups(ax, drawn, boxes, box_w, box_h)
    if show_path:
        _draw_path(ax, doc, centers, stages, box_w / 2)
    _legend(ax, stages, kinds_by_name, devices, grouped, show_path, font)
    _frame(ax, racks_per_row * (rack_w + 0.25), -rows * (rack_h + 0.35) + 0.1, title or _title(doc), font)
    _fit_labels(ax, labels)
    return ax


def _degrees(stage: MappingStage) -> str:
    """`` tp8`` / `` tp8 ep8`` for a stage on a group, nothing for one device."""
    if stage.tp <= 1:
        return ""
    return f" tp{stage.tp}" + (f" ep{stage.ep}" if stage.ep > 1 else "")


def _memory_bar(ax, stage: MappingStage, bx: float, by: float, box_w: float, box_h: float) -> None:
    """The stacked memory bar (weights / KV reserve / state / activations / runtime reserve / free)
    of one device."""
    parts = [(k, max(0, getattr(stage.bytes, k) or 0)) for k in MEMORY_COLORS]
    total = sum(v for _, v in parts) or 1
    x = bx + 0.04
    bar_w, bar_h, bar_y = box_w - 0.08, box_h * 0.28, by + 0.06
    for k, v in parts:
        w = bar_w * v / total
        if w > 0:
            ax.add_patch(Rectangle((x, bar_y), w, bar_h, lw=0, facecolor=MEMORY_COLORS[k], zorder=2))
        x += w
    ax.add_patch(Rectangle((bx + 0.04, bar_y), bar_w, bar_h, fill=False, lw=0.5, edgecolor="#333", zorder=3))


def _draw_groups(ax, stages: list[MappingStage], boxes: dict, box_w: float, box_h: float) -> int:
    """One outline around each group stage's member boxes (per rack column they occupy; the
    degrees are on the stage's label); returns how many groups were drawn."""
    drawn = 0
    for stage in stages:
        members = [m for m in stage.devices if m in boxes]
        if len(members) < 2:
            continue
        columns: dict[float, list[float]] = {}
        for m in members:
            x, y = boxes[m]
            columns.setdefault(x, []).append(y)
        for k, (x, ys) in enumerate(sorted(columns.items())):
            lo, hi = min(ys) - 0.05, max(ys) + box_h + 0.05
            ax.add_patch(Rectangle((x - 0.06, lo), box_w + 0.12, hi - lo, fill=False, edgecolor=GROUP_COLOR,
                                   lw=1.6, zorder=5, gid=f"group:{members[0]}" + (f":{k}" if k else "")))
        drawn += 1
    return drawn


def _fit_labels(ax, labels, margin: float = 0.04) -> None:
    """Shrink each stage label until it fits inside its box (measured on the drawn figure)."""
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    for text, left, right in labels:
        (x0, _), (x1, _) = ax.transData.transform([(left + margin, 0), (right - margin, 0)])
        room = x1 - x0
        while text.get_fontsize() > 3.5 and text.get_window_extent(renderer).width > room:
            text.set_fontsize(text.get_fontsize() - 0.25)


def _draw_path(ax, doc, centers, stages, half_w: float) -> None:
    route = [d for d in doc.get("route", []) if d in centers]
    if not route:
        route = [s.device for s in sorted(stages.values(), key=lambda s: s.index)]
    steps = []
    for a, b in zip(route, route[1:]):
        if a != b and (a, b) not in steps:
            steps.append((a, b))
    revisits = len(steps) > len(set(route)) - 1
    for a, b in steps:
        (xa, ya), (xb, yb) = centers[a], centers[b]
        if abs(xa - xb) < 1e-6:       # same rack: an arc along the boxes' right edges
            start, end, rad = (xa + half_w, ya), (xb + half_w, yb), (-0.35 if yb < ya else 0.35)
        else:                          # leave from the right edge, enter at the left edge
            start, end, rad = (xa + half_w, ya), (xb - half_w, yb), 0.08
        arrow = FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=7,
                                connectionstyle=f"arc3,rad={rad}", color="#111",
                                lw=0.7 if revisits else 0.9, alpha=0.45 if revisits else 0.8,
                                shrinkA=1, shrinkB=1, zorder=4, gid=f"hop:{a}->{b}")
        ax.add_patch(arrow)


def _title(doc: dict) -> str:
    from placer.specs.units import format_duration_us, format_tokens

    s = doc.get("summary", {})
    w = doc.get("workload", {})
    parts = ["stage layout:", doc.get("model", {}).get("name", "model"), "on",
             doc.get("hardware", {}).get("name", "fleet"), f"({doc.get('mode', '?')})"]
    text = " ".join(parts)
    details = []
    if w.get("context_tokens"):
        details.append(f"context {format_tokens(int(w['context_tokens']))}")
    if w.get("concurrency") is not None:
        details.append(f"{w['concurrency']} live requests")
    if s.get("devices_used") is not None:
        details.append(f"{s['devices_used']} devices")
    if s.get("hops") is not None:
        details.append(f"{s['hops']} hops")
    if s.get("hop_latency_us") is not None:
        details.append(f"hop latency {format_duration_us(s['hop_latency_us'])}")
    return text + ("\n" + ", ".join(details) if details else "")


def _legend(ax, stages, kinds_by_name, devices, grouped: bool, show_path: bool, font: float) -> None:
    """The layout's legend: the layer kinds present, the memory bar's parts, unused, groups, the path."""
    handles = [Patch(facecolor=KIND_COLORS[k], label=KIND_LABELS[k])
               for k in ("attention", "linear_attention", "ffn", "embedding")
               if any(k in _stage_kinds(s, kinds_by_name) or (k == "embedding" and "lm_head" in
                      _stage_kinds(s, kinds_by_name)) for s in stages.values())]
    handles += [Patch(facecolor=MEMORY_COLORS[k], edgecolor="#333", lw=0.5, label=MEMORY_LABELS[k])
                for k in MEMORY_COLORS]
    handles.append(Patch(facecolor=UNUSED_COLOR, edgecolor="#c8c8c8", label="unused"))
    if grouped:
        handles.append(Patch(fill=False, edgecolor=GROUP_COLOR, lw=1.6, label="stage on a group (tp / ep)"))
    if any(not d[3] for d in devices):
        handles.append(Patch(facecolor=UNUSED_COLOR, edgecolor="#c8c8c8", hatch="////", label="unavailable"))
    if show_path:
        handles.append(Line2D([], [], color="#111", lw=0.9, marker=">", markersize=4, label="token path"))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.02), ncol=min(len(handles), 6),
              fontsize=font + 1, frameon=False,
              title="device box: stage and layers on a band coloured by layer kind; below, its memory",
              title_fontsize=font + 1)


def _frame(ax, width: float, bottom: float, title: str, font: float) -> None:
    """Limits, aspect and labels of the layout: a diagram, not a chart (no ticks, no frame)."""
    ax.set_xlim(-0.2, width)
    ax.set_ylim(bottom, 0.2)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.set_xlabel("racks, left to right and row by row")
    ax.set_ylabel("devices of each rack, slot 0 at the top")
    ax.set_title(title, fontsize=font + 3)
