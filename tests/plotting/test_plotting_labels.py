"""Every picture explains itself: a title saying what it shows, labelled axes, a legend entry for
every colour and marker, text that fits; and each is written exactly where it was asked for."""

from __future__ import annotations

import json
import math

import matplotlib
import pytest

matplotlib.use("Agg")

from placer.plotting import plot_frontier, plot_gantt, plot_layout  # noqa: E402
from placer.plotting.plot_layout import KIND_COLORS, KIND_LABELS, MEMORY_LABELS  # noqa: E402
from placer.specs.catalog import project_root  # noqa: E402

SOLUTIONS = project_root() / "solutions"
H100 = SOLUTIONS / "gpt-oss-120b__h100__contiguous.json"      # 4 stages on h100 (8 racks of 8)
KIMI = SOLUTIONS / "kimi-k3__wse-3t__contiguous.json"         # 70 stages on wse-3t (32 racks of 3)
needs_solutions = pytest.mark.skipif(not (H100.exists() and KIMI.exists()), reason="solutions/ is empty")
PNG = b"\x89PNG\r\n\x1a\n"


def _legend_labels(ax) -> list[str]:
    legend = ax.get_legend()
    assert legend is not None, "no legend"
    return [t.get_text() for t in legend.get_texts()]


@needs_solutions
@pytest.mark.parametrize("path", [H100, KIMI], ids=["h100", "kimi-k3"])
def test_layout_explains_itself_and_its_labels_fit(path):
    doc = json.loads(path.read_text())
    ax = plot_layout(doc)
    fig = ax.figure
    assert ax.get_title().startswith(f"stage layout: {doc['model']['name']} on {doc['hardware']['name']}")
    assert ax.get_xlabel() and ax.get_ylabel()
    labels = _legend_labels(ax)
    for key in ("weights", "kv_reserve", "state", "activations", "free"):
        assert MEMORY_LABELS[key] in labels
    assert "token path" in labels and "unused" in labels
    # every band colour drawn has a legend entry
    drawn = {tuple(round(c, 3) for c in p.get_facecolor()) for p in ax.patches}
    for kind, colour in KIND_COLORS.items():
        rgba = tuple(round(c, 3) for c in matplotlib.colors.to_rgba(colour))
        if rgba in drawn and kind in KIND_LABELS:
            assert KIND_LABELS[kind] in labels, kind
    # each stage label inside its device box
    renderer = fig.canvas.get_renderer()
    boxes = {p.get_gid().split(":", 1)[1]: p for p in ax.patches if str(p.get_gid()).startswith("device:")}
    texts = [t for t in ax.texts if str(t.get_gid()).startswith("label:")]
    assert len(texts) == len(doc["stages"])
    for t in texts:
        box = boxes[t.get_gid().split(":", 1)[1]].get_window_extent(renderer)
        inner = t.get_window_extent(renderer)
        assert box.x0 <= inner.x0 and inner.x1 <= box.x1, (t.get_text(), inner, box)
    # the racks fill their rows evenly: no row with fewer than half the racks of the others
    racks = [p for p in ax.patches if str(p.get_gid()).startswith("rack:")]
    rows: dict[float, int] = {}
    for p in racks:
        rows[round(p.get_y() + p.get_height(), 3)] = rows.get(round(p.get_y() + p.get_height(), 3), 0) + 1
    counts = sorted(rows.values())
    assert sum(counts) == len(racks) and counts[0] * 2 >= counts[-1], counts
    matplotlib.pyplot.close(fig)


@needs_solutions
def test_h100_racks_split_evenly():
    ax = plot_layout(json.loads(H100.read_text()))
    racks = [p for p in ax.patches if str(p.get_gid()).startswith("rack:")]
    tops = sorted({round(p.get_y() + p.get_height(), 3) for p in racks})
    assert len(racks) == 8 and len(tops) == 2
    assert [sum(1 for p in racks if round(p.get_y() + p.get_height(), 3) == t) for t in tops] == [4, 4]
    matplotlib.pyplot.close(ax.figure)


def _trace(kimi=False, **kw):
    from placer.simulate.des import simulate_mapping

    return simulate_mapping(json.loads((KIMI if kimi else H100).read_text()), trace=True, seed=0, **kw)


@needs_solutions
def test_gantt_has_a_legend_for_every_colour_and_names_its_window():
    res = _trace(requests=3, output_tokens=4, decode_only=True)
    ax = plot_gantt(res)
    slots = sorted({iv.slot for iv in res.trace})
    assert len(slots) <= 12
    labels = _legend_labels(ax)
    assert [x for x in labels if x.startswith("batch slot ")] == [f"batch slot {s}" for s in slots]
    assert "idle" in labels
    total = max(iv.end for iv in res.trace)
    from placer.specs.units import format_duration_us

    assert ax.get_title().startswith(f"stage occupancy over time, all {format_duration_us(total)} simulated")
    assert ax.get_xlabel() == "time since the first request (ms)" and ax.get_ylabel() == "stage (device)"
    assert math.isclose(ax.get_xlim()[1], total / 1e3)
    matplotlib.pyplot.close(ax.figure)
    # a long trace: the window drawn is stated, and many slots get a colour bar instead of entries
    res = _trace(kimi=True, requests=184, output_tokens=4, schedule="micro-batch", micro_batch=8, decode_only=True)
    ax = plot_gantt(res, max_intervals=500)
    starts = sorted(iv.start for iv in res.trace)
    assert len(starts) > 500
    assert ax.get_title().startswith(f"stage occupancy over time, the first {format_duration_us(starts[500])} of "
                                     f"{format_duration_us(max(iv.end for iv in res.trace))} simulated "
                                     f"(500 busy intervals)")
    bars = [a for a in ax.figure.axes if a is not ax]
    assert len(bars) == 1 and bars[0].get_ylabel() == "batch slot of the step"
    matplotlib.pyplot.close(ax.figure)
    # with prefill (the default) the steps that carry prompt chunks are hatched and named
    res = _trace(requests=1, output_tokens=4)
    assert any(iv.prefill_tokens for iv in res.trace)
    ax = plot_gantt(res)
    assert "prefill" in _legend_labels(ax)
    matplotlib.pyplot.close(ax.figure)


def test_frontier_explains_its_markers():
    rows = [dict(mode="contiguous", context_tokens=2**18, weight_bits=4, kv_bits=8, concurrency=c, devices_used=d,
                 status="optimal", devices_proven=p, pareto=q)
            for c, d, p, q in ((16, 47, True, False), (64, 47, False, True), (184, 70, True, True))]
    ax = plot_frontier(rows, title="devices vs live requests")
    labels = _legend_labels(ax)
    assert labels[0] == "256k contiguous"
    assert {"filled: device count proven", "hollow: not proven", "ring: Pareto-optimal",
            "number at a line's end: most live requests placed"} <= set(labels)
    assert ax.get_xlabel() == "live requests (concurrency)" and ax.get_ylabel() == "devices"
    assert [t.get_text() for t in ax.texts] == ["184"]
    matplotlib.pyplot.close(ax.figure)


@needs_solutions
@pytest.mark.parametrize("name", ["occupancy", "occupancy.png", "occupancy.svg"])
def test_gantt_is_written_exactly_where_asked(name, run_cli, tmp_path):
    target = tmp_path / name
    code, out, err = run_cli(["simulate", H100, "--requests", "2", "--output-tokens", "2", "--gantt", target])
    assert code == 0, err
    assert out.splitlines()[-1] == f"stage occupancy drawn to {target}"
    assert [p.name for p in tmp_path.iterdir()] == [name]
    head = target.read_bytes()[:8]
    assert head == PNG if not name.endswith(".svg") else head.startswith(b"<?xml")


@needs_solutions
def test_an_unknown_image_format_is_refused_before_any_work(run_cli, tmp_path):
    for argv in (["simulate", H100, "--gantt", tmp_path / "g.xyz"], ["plot", H100, "-o", tmp_path / "g.xyz"]):
        code, out, err = run_cli(argv)
        assert (code, out) == (2, "")
        assert err == (f"error: {tmp_path / 'g.xyz'}: (whole file): unknown image format '.xyz' "
                       f"(use png, svg, pdf, ...; no suffix writes PNG)\n")
    assert list(tmp_path.iterdir()) == []
    code, out, err = run_cli(["plot", H100, "-o", tmp_path / "layout"])
    assert code == 0 and out == f"wrote {tmp_path / 'layout'}\n"
    assert (tmp_path / "layout").read_bytes()[:8] == PNG


def test_speed_frontier_explains_its_lines_dots_and_floors():
    from placer.plotting import plot_speed_frontiers

    rows = [dict(platform=p, per_user_tokens_per_s=s, tokens_per_s_per_mw=m, tokens_per_s_per_device=d, pareto=f)
            for p, s, m, d, f in (("a", 100, 5e6, 1e3, True), ("a", 50, 9e6, 2e3, True), ("a", 40, 4e6, 1e3, False),
                                  ("b", 80, 7e6, 3e3, True))]
    fig = plot_speed_frontiers(rows, speeds=(60,), title="m on a, b")
    left, right = fig.axes
    assert fig._suptitle.get_text() == "m on a, b"
    assert left.get_title() == "tokens/s per MW against per-user speed"
    assert right.get_title() == "tokens/s per device against per-user speed"
    assert _legend_labels(left) == ["a (2 points)", "b (1 points)", "line: Pareto-optimal placements",
                                    "faint dot: another simulated point", "dashed: a per-user speed floor"]
    for ax in (left, right):
        assert ax.get_xlabel() and ax.get_ylabel()
    matplotlib.pyplot.close(fig)
