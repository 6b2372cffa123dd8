"""Fit the simulator's cost model to measured serving speeds, with leave-one-out and held-out errors.

    python benchmarks/calibrate_simulator.py            # fit, print the table
    python benchmarks/calibrate_simulator.py --write    # and write the perf blocks of the specs
    python benchmarks/calibrate_simulator.py --markdown # the table as the README shows it

The corpus is ``benchmarks/data/calibration.yaml``: published measurements of 2024-26 serving
software, each with its source and what the source leaves unstated. Every point is set up as it
was measured (placer's catalog model, the hardware spec, precision, tensor/expert parallel group or
wafer pipeline, concurrency, prompt and output lengths) and its time per output token is computed
from the simulator's own cost model (:mod:`placer.simulate.cost`: :func:`segments_of`,
:meth:`Segment.terms_for`) with every constant at one, so that the modelled time is linear in the
constants::

    t = sum_k constant_k x feature_k + fixed part (hops, collective wire time, SRAM at peak rate)

GPUs (one set for every NVIDIA GPU; the peaks differ per device): per-layer overhead, its growth
per request of the batch, per-MoE-layer overhead, 1 / HBM efficiency for dense reads, 1 / efficiency
for routed-expert reads, 1 / compute efficiency, fixed time per collective. A point at concurrency C
is one decode step of C requests at the mean context isl + osl / 2, plus the prefill work that a
closed loop mixes into the steps (a prompt of isl tokens starts every osl / C steps: its FLOPs and
the experts it touches beyond the decode batch's).

Wafers (WSE-3): per-layer cost, per-wafer cost (one per Cerebras software release: the launch
release of 2024-08 and the release of 2024-10 onwards, which Cerebras describes as rewritten
kernels with wafer I/O asynchronous to compute), SRAM reads at the hardware's 21 PB/s, the
wafer-to-wafer hop (link latency plus the activation over 1.2 Tb/s). The spec's perf block holds the
current release's constants.

The fit minimises the squared log error over the ``fit`` points (scipy.optimize.least_squares with
efficiencies bounded by 1 and overheads by 0). Each fit point is then left out, the model refitted,
and the point predicted (the LOO column); ``held_out`` points are never fitted; ``flagged`` and
``excluded`` points are printed with the reason and not counted.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from placer import load_fleet, load_model, make_instance, workload_for  # noqa: E402
from placer.algorithms import place  # noqa: E402
from placer.problem.instance import Layout  # noqa: E402
from placer.simulate import Traffic, segments_of, simulate  # noqa: E402
from placer.simulate.cost import cached_tokens  # noqa: E402
from placer.simulate.des import sum_min  # noqa: E402
from placer.specs.fleet import fleet_from_dict  # noqa: E402
from placer.specs.spec_io import atomic_write_text, load_yaml_or_json  # noqa: E402

CORPUS = ROOT / "benchmarks" / "data" / "calibration.yaml"
SETS = ("fit", "held_out", "flagged", "excluded")
METRICS = ("tpot_ms", "user_tokens_per_s")
GPU_PARAMS = ("layer_us", "layer_request_us", "moe_layer_us", "inv_bandwidth", "inv_expert_bandwidth",
              "inv_compute", "collective_us")
WAFER_COMPUTE_EFFICIENCY = 0.5     # its term is under 0.1% of a wafer step at batch 1
CURRENT_RELEASE = "2024-10"
GPU_SPECS = ("h100", "h200", "b200")
REQUIRED = ("id", "set", "hardware", "model", "weight_bits", "kv_bits", "isl", "osl", "concurrency", "metric",
            "value", "speculative", "status", "source")


@dataclass(frozen=True)
class Point:
    id: str
    set: str
    hardware: str
    model: str
    weight_bits: int
    kv_bits: int
    isl: int
    osl: int
    concurrency: int
    metric: str
    value: float
    speculative: str
    status: str
    source: str
    tp: int = 1
    ep: bool = False
    wafers: int | None = None
    release: str | None = None
    runtime: str = ""
    version: str = ""
    date: str = ""
    unstated: tuple[str, ...] = ()
    note: str = ""

    @property
    def measured_us(self) -> float:
        """Measured time per output token, microseconds."""
        return self.value * 1e3 if self.metric == "tpot_ms" else 1e6 / self.value

    @property
    def wafer(self) -> bool:
        return self.hardware.startswith("wse")


def load_corpus(path: Path = CORPUS) -> list[Point]:
    """The corpus' points, checked field by field (a bad entry stops with its id and field)."""
    data, _ = load_yaml_or_json(path)
    out, seen = [], set()
    for i, raw in enumerate(data.get("points") or []):
        where = f"{path.name}: points[{i}]"
        missing = [k for k in REQUIRED if k not in raw]
        if missing:
            raise SystemExit(f"error: {where}: {missing[0]}: missing")
        if raw["set"] not in SETS or raw["metric"] not in METRICS:
            raise SystemExit(f"error: {where} ({raw['id']}): set/metric: unknown {raw['set']!r}/{raw['metric']!r}")
        if raw["id"] in seen:
            raise SystemExit(f"error: {where}: id: {raw['id']!r} appears twice")
        if not float(raw["value"]) > 0:
            raise SystemExit(f"error: {where} ({raw['id']}): value: must be positive")
        seen.add(raw["id"])
        kw = {k: raw[k] for k in Point.__dataclass_fields__ if k in raw and raw[k] is not None}
        kw["unstated"] = tuple(raw.get("unstated") or ())
        kw["date"], kw["release"] = str(raw.get("date", "")), (str(raw["release"]) if raw.get("release") else None)
        kw["value"] = float(raw["value"])
        out.append(Point(**kw))
    return out


# ----------------------------------------------------------------------------- features
UNIT_PERF = dict(fixed_overhead_us_per_layer=0.0, fixed_overhead_us_per_stage=0.0, bandwidth_efficiency=1.0,
                 compute_efficiency=1.0, expert_bandwidth_efficiency=1.0, collective_latency_us=0.0)


# Models of corpus points that placer's catalog does not ship, from their Hugging Face config.json
# (Qwen/Qwen3-32B: hidden_size 5120, 64 layers, 64 query and 8 KV heads of 128, intermediate 25600,
# vocabulary 151,936, untied embeddings).
CAL_MODELS = {
    "qwen3-32b": {"name": "qwen3-32b", "hidden_size": 5120, "vocab_size": 151936, "tie_word_embeddings": False,
                  "num_layers": 64, "pattern": "A*64",
                  "mixers": {"attention": {"type": "gqa", "num_heads": 64, "num_kv_heads": 8, "head_dim": 128,
                                           "qk_norm": True}},
                  "ffns": {"mlp": {"type": "dense", "intermediate_size": 25600}},
                  "layer_types": {"A": {"mixer": "attention", "ffn": "mlp"}}},
}


def model_of(name: str):
    """A catalog model, or one of :data:`CAL_MODELS`."""
    if name in CAL_MODELS:
        from placer.specs.model import model_from_dict
        return model_from_dict(CAL_MODELS[name], source=f"{name} (calibration)")
    return load_model(name)


def fleet_with_perf(name: str, perf: dict):
    """``hardware/<name>.yaml`` with its device's perf block replaced by ``perf``."""
    data, _ = load_yaml_or_json(ROOT / "hardware" / f"{name}.yaml")
    data = dict(data)
    data["device"] = dict(data["device"], perf=perf)
    return fleet_from_dict(data, source=f"{name} (calibration)")


def setup(point: Point, perf: dict):
    """(instance, assignment) of ``point`` as measured, on its hardware with ``perf``."""
    model = model_of(point.model)
    fleet = fleet_with_perf(point.hardware, perf)
    wl = workload_for(model, context=point.isl + point.osl, concurrency=point.concurrency,
                      weight_bits=point.weight_bits, kv_bits=point.kv_bits)
    inst = make_instance(model, fleet, wl, mode="contiguous", layout=Layout(tp=point.tp, ep=point.ep))
    res = place(inst, method="dp")
    if res.assignment is None:
        raise SystemExit(f"error: {point.id}: no placement of {point.model} on {point.hardware}")
    if point.wafers is not None and res.devices_used != point.wafers:
        raise SystemExit(f"error: {point.id}: wafers: the fewest-wafer placement uses {res.devices_used}, "
                         f"the deployment {point.wafers}")
    if not point.wafer and res.devices_used != 1:
        raise SystemExit(f"error: {point.id}: expected one device group, the placement uses {res.devices_used}")
    return inst, res.assignment


def _prefill_extra(seg, p: int, b: int) -> tuple[float, float]:
    """(FLOPs, routed-expert bytes) one prompt of ``p`` tokens adds to a decode step of ``b``:
    its tokens' GEMMs and attention, and the experts it touches that the decode batch does not."""
    flops = sum(2.0 * c.active_params * p + 4.0 * c.state_elements * p + 2.0 * c.kv_elements_per_token
                * sum_min(p, c.kv_window) for c in seg.costs)
    experts = sum(max(0.0, c.expert_bytes_read(p) - c.expert_bytes_read(b)) for c in seg.costs)
    return flops, experts


def features(point: Point) -> tuple[dict, float, int]:
    """(feature per constant, the constant-free microseconds, wafers or devices) of ``point``'s time
    per output token, from the simulator's segments at unit constants."""
    inst, assignment = setup(point, UNIT_PERF)
    segs = segments_of(inst, assignment)
    t0 = inst.devices[segs[0].device].type
    if point.wafer:
        rel = point.release or CURRENT_RELEASE
        f = {"layer_us": 0.0, f"stage_us@{rel}": 0.0}
        fixed = 0.0
        for s in segs:
            t = s.terms_for(1, cached_tokens([point.isl + point.osl // 2], s.windows()))
            f["layer_us"] += s.layers
            f[f"stage_us@{rel}"] += 1
            fixed += (t.bytes + t.expert_bytes) / s.bytes_per_us + t.flops / (s.flops_per_us * WAFER_COMPUTE_EFFICIENCY)
            fixed += s.hop_time_us(1)
        return f, fixed, len(segs)
    (s,) = segs
    b = point.concurrency
    t = s.terms_for(b, cached_tokens([point.isl + point.osl // 2] * b, s.windows()))
    pf_flops, pf_experts = _prefill_extra(s, point.isl, b)
    share = b / point.osl                   # prompts started per decode step in a closed loop
    bw, fl = t0.memory_bandwidth / 1e6, s.flops_per_us
    f = {"layer_us": s.layers, "layer_request_us": s.layers * b, "moe_layer_us": s.moe_layers,
         "inv_bandwidth": t.bytes / bw, "inv_expert_bandwidth": (t.expert_bytes + share * pf_experts) / bw,
         "inv_compute": (t.flops + share * pf_flops) / fl,
         "collective_us": sum(c.count for c in s.collectives if c.group_size > 1)}
    return f, t.comm_us, len(inst.members(s.device))


# ----------------------------------------------------------------------------- fitting
@dataclass
class Family:
    """The points of one constant set (NVIDIA GPUs, or WSE-3 wafers) and their features."""

    name: str
    params: tuple[str, ...]
    points: list[Point]
    feats: dict = field(default_factory=dict)    # id -> (row over params, fixed us)

    def row(self, p: Point) -> tuple[np.ndarray, float]:
        f, fixed = self.feats[p.id]
        return np.array([f.get(k, 0.0) for k in self.params]), fixed

    def predict(self, x: np.ndarray, p: Point) -> float:
        r, fixed = self.row(p)
        return float(r @ x + fixed)


def bounds_of(params) -> tuple[list, list]:
    lo = [1.0 if k.startswith("inv_") else 0.0 for k in params]
    hi = [10.0 if k.startswith("inv_") else 1e4 for k in params]
    return lo, hi


def fit(fam: Family, pts: list[Point]) -> np.ndarray:
    """Constants minimising sum (log(model / measured))^2 over ``pts``; a constant no point of
    ``pts`` informs stays at its bound's low end."""
    from scipy.optimize import least_squares

    rows = np.array([fam.row(p)[0] for p in pts])
    fixed = np.array([fam.row(p)[1] for p in pts])
    meas = np.array([p.measured_us for p in pts])
    used = rows.any(axis=0)
    lo, hi = (np.array(v) for v in bounds_of(fam.params))
    x = lo.copy()
    if not used.any():
        return x

    def resid(z):
        x[used] = z
        return np.log(np.maximum(rows @ x + fixed, 1e-9) / meas)

    start = np.where(lo[used] > 0, 1.2, 1.0)
    sol = least_squares(resid, start, bounds=(lo[used], hi[used]), x_scale="jac", max_nfev=20000)
    x[used] = sol.x
    return x


def evaluate(fam: Family) -> dict:
    """Fit on the family's fit points, leave each out in turn, predict the rest."""
    fit_pts = [p for p in fam.points if p.set == "fit"]
    x = fit(fam, fit_pts)
    rows = []
    for p in fam.points:
        loo = None
        if p.set == "fit":
            rest = [q for q in fit_pts if q.id != p.id]
            xl = fit(fam, rest)
            informed = np.array([any(fam.row(q)[0][k] for q in rest) for k in range(len(fam.params))])
            r = fam.row(p)[0]
            loo = fam.predict(xl, p) if all(informed[r != 0]) else None
        rows.append(dict(point=p, fitted=fam.predict(x, p), loo=loo))
    return dict(x=x, rows=rows)


def speed(p: Point, us: float | None) -> float | None:
    """A modelled time per output token in the point's own unit."""
    if us is None:
        return None
    return us / 1e3 if p.metric == "tpot_ms" else 1e6 / us


def ratio(p: Point, us: float | None) -> float | None:
    """Model speed / measured speed (> 1: the model is too fast)."""
    return None if us is None else p.measured_us / us


# ----------------------------------------------------------------------------- constants and specs
def gpu_perf(x: np.ndarray) -> dict:
    v = {k: float(val) for k, val in zip(GPU_PARAMS, x)}
    return dict(fixed_overhead_us_per_layer=round(v["layer_us"], 3), fixed_overhead_us_per_stage=0.0,
                fixed_overhead_us_per_layer_per_request=round(v["layer_request_us"], 4),
                fixed_overhead_us_per_moe_layer=round(v["moe_layer_us"], 3),
                bandwidth_efficiency=round(1 / v["inv_bandwidth"], 4),
                expert_bandwidth_efficiency=round(1 / v["inv_expert_bandwidth"], 4),
                compute_efficiency=round(1 / v["inv_compute"], 4), collective_latency_us=round(v["collective_us"], 3))


def wafer_perf(x: np.ndarray, params, release: str = CURRENT_RELEASE) -> dict:
    v = {k: float(val) for k, val in zip(params, x)}
    return dict(fixed_overhead_us_per_layer=round(v["layer_us"], 3),
                fixed_overhead_us_per_stage=round(v[f"stage_us@{release}"], 3),
                bandwidth_efficiency=1.0, compute_efficiency=WAFER_COMPUTE_EFFICIENCY)


_PERF = re.compile(r"^  perf:\n(?:^    .*\n|^\s*\n)*", re.M)


def perf_block(perf: dict, comment: list[str]) -> str:
    lines = ["  perf:"] + [f"    # {c}" if c else "    #" for c in comment]
    lines += [f"    {k}: {v}" for k, v in perf.items()]
    return "\n".join(lines) + "\n"


def write_perf(name: str, block: str) -> None:
    """Replace the ``perf:`` block of ``hardware/<name>.yaml`` (nothing else in the file changes)."""
    path = ROOT / "hardware" / f"{name}.yaml"
    text = path.read_text()
    if not _PERF.search(text):
        raise SystemExit(f"{path}: no 'perf:' block under 'device:' to replace")
    atomic_write_text(path, _PERF.sub(lambda _m: block, text, count=1))
    load_fleet(path)   # still a valid spec


def wse2_perf(wafer_x: np.ndarray, params, points: list[Point]) -> dict | None:
    """WSE-2: the wse-3 fit's per-layer cost and the per-wafer cost WaferLLM's speed leaves."""
    p = next((q for q in points if q.hardware == "wse-2"), None)
    if p is None:
        return None
    f, fixed, _ = features(p)
    perf = wafer_perf(wafer_x, params)
    stage = p.measured_us - fixed - perf["fixed_overhead_us_per_layer"] * f["layer_us"]
    return dict(perf, fixed_overhead_us_per_stage=round(max(stage, 0.0), 3))


# ----------------------------------------------------------------------------- report
def _fmt(v, unit):
    if v is None:
        return "-"
    return f"{v:,.2f}" if unit == "tpot_ms" else f"{v:,.0f}"


def _err(r):
    return "-" if r is None else f"{r:.2f}x"


def summary(rows, key) -> str:
    errs = [max(r, 1 / r) for r in (ratio(x["point"], x[key]) for x in rows) if r is not None]
    if not errs:
        return "no points"
    return (f"{len(errs)} points: median {statistics.median(errs):.2f}x, mean {statistics.fmean(errs):.2f}x, "
            f"worst {max(errs):.2f}x")


def report(fams: list[Family], results: dict, markdown: bool) -> list[str]:
    out = []
    head = ("| point | set | measured | in-fit | LOO | error in-fit | error LOO | source |" if markdown else
            f"  {'point':<40} {'set':<9} {'measured':>10} {'in-fit':>10} {'LOO':>10} {'err fit':>8} {'err LOO':>8}")
    for fam in fams:
        res = results[fam.name]
        out.append(f"\n{fam.name}: constants {dict(zip(fam.params, (round(float(v), 4) for v in res['x'])))}")
        out.append(head)
        if markdown:
            out.append("|---|---|---|---|---|---|---|---|")
        for x in res["rows"]:
            p = x["point"]
            unit = "ms/token" if p.metric == "tpot_ms" else "tok/s"
            cells = (p.id, p.set, f"{_fmt(p.value, p.metric)} {unit}", _fmt(speed(p, x["fitted"]), p.metric),
                     _fmt(speed(p, x["loo"]), p.metric), _err(ratio(p, x["fitted"])), _err(ratio(p, x["loo"])))
            if markdown:
                src = p.source.split(";")[-1].strip() if "http" in p.source else p.source.split(" (")[0]
                out.append("| " + " | ".join(cells) + f" | {p.runtime} {p.version}, {p.date}; {src} |")
            else:
                flag = f"  [{', '.join(p.unstated)} not stated]" if p.unstated else ""
                out.append(f"  {cells[0]:<40} {cells[1]:<9} {cells[2]:>16} {cells[3]:>10} {cells[4]:>10} "
                           f"{cells[5]:>8} {cells[6]:>8}{flag}")
        fitted = [x for x in res["rows"] if x["point"].set == "fit"]
        held = [x for x in res["rows"] if x["point"].set == "held_out"]
        out.append(f"  fit points in-fit: {summary(fitted, 'fitted')}")
        out.append(f"  fit points leave-one-out: {summary(fitted, 'loo')}")
        out.append(f"  held-out points: {summary(held, 'fitted')}")
    return out


def families(points: list[Point]) -> list[Family]:
    gpus = [p for p in points if not p.wafer]
    wafers = [p for p in points if p.hardware == "wse-3"]
    releases = sorted({p.release or CURRENT_RELEASE for p in wafers})
    fams = [Family("GPUs (h100, h200, b200 constants; mi300x points held out)", GPU_PARAMS, gpus),
            Family("WSE-3 wafers", ("layer_us",) + tuple(f"stage_us@{r}" for r in releases), wafers)]
    for fam in fams:
        keep = []
        for p in fam.points:
            try:
                f, fixed, _n = features(p)
            except SystemExit as exc:       # an excluded point may not be expressible at all
                if p.set != "excluded":
                    raise
                print(f"  excluded {p.id}: cannot be set up ({exc})")
                continue
            fam.feats[p.id] = (f, fixed)
            keep.append(p)
        fam.points = keep
    return fams


def check_des(fam: Family, x: np.ndarray) -> list[str]:
    """The discrete-event simulator on each fitted wafer point with the written constants: its
    one-user speed must be the closed form's (same cost model, batch 1)."""
    out = []
    for p in fam.points:
        if p.set != "fit" or (p.release or CURRENT_RELEASE) != CURRENT_RELEASE:
            continue
        inst, assignment = setup(p, wafer_perf(x, fam.params))
        sim = simulate(inst, assignment, Traffic(requests=1, output_tokens=16, context=p.isl + p.osl // 2))
        closed = 1e6 / fam.predict(x, p)
        out.append(f"  discrete-event check {p.id}: {sim.per_user_tokens_per_s:,.1f} tok/s (closed form {closed:,.1f})")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write", action="store_true", help="write the perf blocks of the GPU and wafer specs")
    ap.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    args = ap.parse_args(argv)
    points = load_corpus(args.corpus)
    fams = families(points)
    results = {f.name: evaluate(f) for f in fams}
    for line in report(fams, results, args.markdown):
        print(line)
    gfam, wfam = fams
    gx, wx = results[gfam.name]["x"], results[wfam.name]["x"]
    print(f"\nGPU perf block: {gpu_perf(gx)}")
    print(f"WSE-3 perf block (release {CURRENT_RELEASE} onwards): {wafer_perf(wx, wfam.params)}")
    print(f"WSE-3 launch release 2024-08 (superseded, not written): {wafer_perf(wx, wfam.params, '2024-08')}")
    for line in check_des(wfam, wx):
        print(line)
    excluded = [p for p in points if p.set == "excluded"]
    for p in excluded:
        print(f"  excluded {p.id}: {p.note.split('.')[0]}.")
    if args.write:
        write_specs(gx, wx, wfam.params, points, results)
    return 0


def write_specs(gx, wx, wparams, points, results) -> None:
    """Write the fitted constants into the perf blocks, each with where it comes from."""
    gname = next(k for k in results if k.startswith("GPUs"))
    wname = next(k for k in results if k.startswith("WSE"))
    gfit = [x for x in results[gname]["rows"] if x["point"].set == "fit"]
    wfit = [x for x in results[wname]["rows"] if x["point"].set == "fit"]
    common = ["Cost-model constants (placer/simulate/cost.py; docs/cost_model.md), fitted by",
              "benchmarks/calibrate_simulator.py to the measured corpus benchmarks/data/calibration.yaml",
              "(every point's source, precision, layout, lengths and concurrency are there)."]
    gpu_comment = common + [
        "One set for every NVIDIA GPU (each keeps its own peaks), fitted to CUDA-graph-era runtimes",
        "of 2025-26 (vLLM V1, SGLang 0.5): per layer, per layer and request, per MoE layer, dense and",
        "routed-expert HBM efficiencies, compute efficiency, time per TP/EP collective.",
        "compute_efficiency may sit at its bound (0.1): the FLOP term is the one that grows with the",
        "batch and the prefill mixed into it, so it carries batch-growing costs the model does not",
        "itemise (MLA's per-head attention FLOPs among them); it is no tensor-core efficiency.",
        f"In-fit: {summary(gfit, 'fitted')}.",
        f"Leave-one-out: {summary(gfit, 'loo')}.",
    ]
    for name in GPU_SPECS:
        write_perf(name, perf_block(gpu_perf(gx), gpu_comment))
    wafer_comment = common + [
        "A wafer stage costs a per-wafer overhead + a per-layer cost + SRAM reads at the full",
        "21 PB/s + FLOPs at half of peak; each hop adds the link latency and the activation over the",
        "link. Constants of Cerebras' serving release of 2024-10 onwards (rewritten kernels,",
        "asynchronous wafer I/O); the launch release (2024-08) paid",
        f"{wafer_perf(wx, wparams, '2024-08')['fixed_overhead_us_per_stage']} us per wafer.",
        f"In-fit: {summary(wfit, 'fitted')}.",
        f"Leave-one-out: {summary(wfit, 'loo')}.",
    ]
    write_perf("wse-3", perf_block(wafer_perf(wx, wparams), wafer_comment))
    write_perf("wse-3t", perf_block(wafer_perf(wx, wparams), common + [
        "No CS-4 speed is published: the wse-3 fit's per-layer and per-wafer costs, SRAM at this",
        "wafer's 43.2 PB/s. A higher clock (U: ~2.8 GHz vs ~1.4) would shrink both; not assumed."]))
    w2 = wse2_perf(wx, wparams, points)
    if w2 is not None:
        write_perf("wse-2", perf_block(w2, common + [
            "WaferLLM's Llama3-8B at 2,700 tok/s on one WSE-2 (V: OSDI 2025) with the wse-3 fit's",
            "per-layer cost sets the per-wafer cost. WaferLLM's kernels are not Cerebras' serving stack."]))
    print("wrote the perf blocks of " + ", ".join(f"hardware/{n}.yaml" for n in (*GPU_SPECS, "wse-3", "wse-3t", "wse-2")))


if __name__ == "__main__":
    sys.exit(main())
