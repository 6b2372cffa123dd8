"""Fit the simulator's per-operation cost model to measured serving speeds, with leave-one-source-out errors.

    python benchmarks/calibrate_simulator.py            # fit, print every point's errors
    python benchmarks/calibrate_simulator.py --write    # and write the perf blocks and the error bands
    python benchmarks/calibrate_simulator.py --markdown # the table as docs/calibration.md shows it

The corpus is ``benchmarks/data/calibration.yaml`` (:mod:`calibration_corpus` reads it and prices
each point's step as operations, :class:`placer.simulate.cost.Terms`). A step's time is
:func:`placer.simulate.cost.roofline_us` of those operations at the constants below (attention at the
16-bit peak, B200's 4-bit weights at ``compute_fp4_speedup`` times the 8-bit rate), plus the fixed
costs per layer (and per request of the batch) and per MoE layer, and per collective a fixed time
plus its bytes at ``collective_bandwidth_efficiency`` of the link. TTFT points (``ttft_ms``) are
never fitted: each is predicted by the fit that held its publication out.

GPUs (one set for every NVIDIA GPU; each keeps its own bandwidth and peaks): every constant has a
physically plausible range, stated in :data:`GPU_RANGES` with its source. Wafers (WSE-3): per-layer
cost and per-wafer cost (one per Cerebras software release), SRAM reads at the hardware's rate and
FLOPs at half of peak; :data:`WAFER_RANGES`.

The fit minimises the squared log error over the ``fit`` points (scipy.optimize.least_squares inside
the ranges). **A constant that lands on a bound of its range fails the run** (exit 1): a constant
pinned at its bound is a missing term, not a calibration. Errors are leave-one-source-out: every
publication of the fit set is held out whole, the model refitted on the others, and its points
predicted (a software release that only the held-out publication measured takes its own constant from
that publication's other points, each point held out in turn; marked ``*``); ``held_out`` points (publications never fitted) are predicted by the full fit;
``flagged`` and ``excluded`` points are printed with the reason and not counted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration_corpus import CORPUS, Point, Work, load_corpus, work  # noqa: E402

from placer.simulate.cost import roofline_us  # noqa: E402

# name: (low, high, unit, source of the range)
GPU_RANGES = {
    "bandwidth_efficiency": (0.6, 0.92, "", "HBM reads of streaming kernels: 0.85-0.9 (llm-analysis, project "
                             "hardware reference 7c); 0.6 allows small per-layer reads"),
    "expert_bandwidth_efficiency": (0.3, 0.92, "", "grouped GEMMs over a few tokens per expert read less "
                                    "contiguously than one dense GEMM; at most the dense rate"),
    "compute_efficiency": (0.3, 0.85, "", "dense GEMM MFU at large M on Hopper/Blackwell tensor cores: 0.5-0.7 "
                           "typical (hardware reference 7c), 0.85 best case"),
    "compute_half_saturation_tokens": (16.0, 2048.0, "tokens", "M at which a GEMM reaches half its large-M rate: "
                                       "tile heights of 64-256 rows and wave quantisation over 132-148 SMs "
                                       "(assumed range, D)"),
    "fixed_overhead_us_per_layer": (1.0, 80.0, "us", "a layer's 10-15 kernels (norms, rotary, attention, "
                                    "activation, small GEMMs off their roofline) at ~1-5 us each, CUDA-graph replayed"),
    "fixed_overhead_us_per_layer_per_request": (0.001, 0.5, "us", "a request's hidden state read and written by a "
                                                "layer's norms, residual adds, rotary and activation quantisation, "
                                                "whole on every TP rank: ~10 passes of 8-32 KB at 3-8 TB/s, "
                                                "0.01-0.1 us; more for kernels off their roofline"),
    "fixed_overhead_us_per_moe_layer": (1.0, 150.0, "us", "router, top-k, token permutation and the grouped "
                                        "GEMM's launch: a few to tens of kernels"),
    "collective_latency_us": (2.0, 40.0, "us", "one NVLink all-reduce or all-to-all of small messages: "
                              "one-shot kernels ~3-8 us, NCCL ~10-30 us"),
    "collective_bandwidth_efficiency": (0.4, 1.0, "", "the share of the NVLink bandwidth per direction a TP "
                                        "all-reduce's or EP all-to-all's bytes reach: NCCL's bus bandwidth, ~0.8 "
                                        "at large messages on 8-GPU NVLink nodes (nccl-tests), less at the "
                                        "few-MB messages of a decode step"),
    "compute_fp4_speedup": (1.0, 2.0, "", "Blackwell only (4-bit tensor cores; fitted on B200's points): NVFP4 GEMMs against the FP8 rate; "
                            "the dense FP4 peak is 2x the FP8 one (NVIDIA B200 datasheet), block scaling and "
                            "16-bit epilogues take part of it"),
}
FP4_DEVICES = ("b200", "b300", "gb200-nvl72", "gb300-nvl72")   # 4-bit tensor cores: compute_fp4_speedup applies
WAFER_RANGES = {
    "fixed_overhead_us_per_layer": (0.5, 60.0, "us", "a layer's reductions across its region of cores and "
                                    "pipeline fill (hardware reference 7a: ~17 us per layer at 1 token/step)"),
    "fixed_overhead_us_per_stage": (1.0, 1000.0, "us", "getting a token's activation in, through and out of a "
                                    "wafer (hardware reference 7a: 50-556 us per wafer)"),
}
WAFER_COMPUTE_EFFICIENCY = 0.5     # its term is under 0.1% of a wafer step at batch 1
CURRENT_RELEASE = "2024-10"
GPU_SPECS = ("h100", "h200", "b200")
# NVIDIA specs no corpus point runs on: they take the set fitted on GPU_SPECS (each keeps its own
# bandwidth and peaks), written with it so that they never keep a stale copy; their speeds print as
# outside the calibrated range (placer.simulate.error_band: a device never measured)
UNMEASURED_NVIDIA = ("b300", "gb200-nvl72", "gb300-nvl72")
AT_BOUND = 1e-3                    # a constant within this share of its range's width of a bound is "at" it


@dataclass
class Family:
    """The points of one constant set (NVIDIA GPUs, or WSE-3 wafers), their work and their model."""

    name: str
    names: tuple[str, ...]                     # constants, in the fit vector's order
    ranges: dict                               # name -> (low, high, ...)
    predict: Callable[[np.ndarray, Work], float]
    works: list[Work] = field(default_factory=list)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        return (np.array([self.ranges[self.base(n)][0] for n in self.names]),
                np.array([self.ranges[self.base(n)][1] for n in self.names]))

    @staticmethod
    def base(name: str) -> str:
        return name.split("@")[0]


def gpu_predict(x: np.ndarray, w: Work) -> float:
    """Modelled step time (us) of a GPU point at constants ``x`` (order of :data:`GPU_RANGES`); a TTFT
    point's mean time to first token (its steps, each weighted by the requests waiting on it; a
    prefill step at least its eager launch floor, less the decode step its launch overlaps)."""
    if w.steps:
        total, last = 0.0, 0.0
        for st in w.steps:
            t = _gpu_step(x, w, st.terms, st.decodes)
            if st.decodes:
                last = t
            total += st.share * max(t, st.floor_us - (last if st.after_decode else 0.0))
        return total
    return _gpu_step(x, w, w.terms[0], w.batch)


def _gpu_step(x: np.ndarray, w: Work, t, decodes: int) -> float:
    eta, eta_moe, mfu, half, layer, per_request, moe, coll, coll_bw, fp4 = x
    (s,), ((bw, peak, attention),) = w.segments, w.peaks
    n_coll = sum(c.count for c in s.collectives if c.group_size > 1)
    fixed = (layer + per_request * decodes) * s.layers + moe * s.moe_layers + coll * n_coll
    gemm = peak * (fp4 if w.point.weight_bits <= 4 and w.point.hardware in FP4_DEVICES else 1.0)
    # the terms' collectives are timed at the link's full bandwidth and no fixed time (UNIT_PERF)
    return fixed + roofline_us(replace(t, comm_us=t.comm_us / coll_bw), bw * eta, bw * eta_moe, gemm * mfu, half,
                               attention * mfu)


def wafer_names(works: list[Work]) -> tuple[str, ...]:
    """The per-layer cost, and a per-wafer cost for each superseded release: on the current one
    (2024-10 onwards, asynchronous wafer I/O) a wafer costs its hop only, which the fit confirms
    (a per-wafer constant for it lands on zero)."""
    rels = sorted({w.point.release or CURRENT_RELEASE for w in works} - {CURRENT_RELEASE})
    return ("fixed_overhead_us_per_layer",) + tuple(f"fixed_overhead_us_per_stage@{r}" for r in rels)


def wafer_predict_for(names: tuple[str, ...]) -> Callable[[np.ndarray, Work], float]:
    def predict(x: np.ndarray, w: Work) -> float:
        v = dict(zip(names, x))
        stage = v.get(f"fixed_overhead_us_per_stage@{w.point.release or CURRENT_RELEASE}", 0.0)
        total = 0.0
        for s, t, (bw, peak, _attention) in zip(w.segments, w.terms, w.peaks):
            total += stage + v["fixed_overhead_us_per_layer"] * s.layers + s.hop_time_us(1)
            total += roofline_us(t, bw, bw, peak * WAFER_COMPUTE_EFFICIENCY)
        return total
    return predict


def fit(fam: Family, works: list[Work], x: np.ndarray | None = None, free: list[int] | None = None) -> np.ndarray:
    """Constants minimising sum (log(model / measured))^2 over ``works``, inside their ranges; with
    ``x`` and ``free``, only the constants at the indices ``free`` move (the others stay at ``x``)."""
    from scipy.optimize import least_squares

    lo, hi = fam.bounds()
    free = list(range(len(fam.names))) if free is None else free
    base = (lo + 0.35 * (hi - lo)) if x is None else np.array(x, dtype=float)
    meas = np.array([w.measured_us for w in works])

    def full(z):
        v = base.copy()
        v[free] = z
        return v

    def resid(z):
        v = full(z)
        return np.log(np.maximum([fam.predict(v, w) for w in works], 1e-9) / meas)

    best = None
    for start in (0.2, 0.35, 0.6):              # three starts inside the box: the model is not convex
        x0 = (lo + start * (hi - lo))[free]
        sol = least_squares(resid, x0, bounds=(lo[free], hi[free]), x_scale="jac", max_nfev=4000)
        if best is None or sol.cost < best.cost:
            best = sol
    return full(best.x)


def at_bounds(fam: Family, x: np.ndarray) -> list[str]:
    """The constants of ``x`` that sit on a bound of their range."""
    lo, hi = fam.bounds()
    tol = AT_BOUND * (hi - lo)
    return [f"{n} = {v:.4g} (range {a:g}-{b:g})" for n, v, a, b, t in zip(fam.names, x, lo, hi, tol)
            if v - a <= t or b - v <= t]


def evaluate(fam: Family) -> dict:
    """The full fit on the ``fit`` points, and each fit publication held out in turn. TTFT points are
    never fitted (the fit is of steps); they are predicted by the fit that held their publication out."""
    checked = [w for w in fam.works if w.point.set == "fit"]
    fitted = [w for w in checked if not is_ttft(w)]
    x = fit(fam, fitted)
    release_held_out: set[str] = set()
    loso: dict[str, float] = {}
    for pub in sorted({w.point.publication for w in checked}):
        rest = [w for w in fitted if w.point.publication != pub]
        own = [w for w in checked if w.point.publication == pub]
        alone = {w.point.release for w in own} - {w.point.release for w in rest}
        # the constants of a release that only this publication measured
        free = [i for i, n in enumerate(fam.names) if "@" in n and n.split("@")[-1] in alone]
        xl = fit(fam, rest)
        if not free:
            for w in own:
                loso[w.point.id] = fam.predict(xl, w)
            continue
        # the shared constants come from the other publications, the release's own constant from the
        # publication's other points (each point held out in turn); a publication with one point of
        # such a release has no leave-out prediction
        for w in own:
            others = [o for o in own if o is not w and not is_ttft(o)]
            if not others:
                continue
            loso[w.point.id] = fam.predict(fit(fam, others, xl, free), w)
        release_held_out.update(w.point.id for w in own if w.point.id in loso)
    rows = [dict(work=w, fitted=fam.predict(x, w), loso=loso.get(w.point.id),
                 release_from_siblings=w.point.id in release_held_out) for w in fam.works]
    return dict(x=x, rows=rows)


def is_ttft(w: Work) -> bool:
    return w.point.metric == "ttft_ms"


def error(w: Work, us: float | None) -> float | None:
    """Model speed / measured speed (> 1: the model is too fast)."""
    return None if us is None else w.measured_us / us


def counted(row) -> float | None:
    """The error a point counts with: leave-one-source-out for fit points, the full fit's for held-out."""
    p = row["work"].point
    if p.set == "fit":
        return error(row["work"], row["loso"])
    return error(row["work"], row["fitted"]) if p.set == "held_out" else None


def summary(errs: list[float]) -> str:
    e = [max(r, 1 / r) for r in errs if r is not None]
    if not e:
        return "no points"
    return f"{len(e)} points: median {statistics.median(e):.2f}x, worst {max(e):.2f}x"


def _speed(w: Work, us: float | None) -> str:
    if us is None:
        return "-"
    p = w.point
    if p.metric in ("tpot_ms", "ttft_ms"):
        return f"{us / 1e3:,.2f}"
    if p.metric == "user_tokens_per_s":
        return f"{1e6 / us:,.0f}"
    per = w.requests * 1e6 / us
    return f"{per / (w.devices if p.metric == 'gpu_tokens_per_s' else 1):,.0f}"


UNITS = {"tpot_ms": "ms/token", "ttft_ms": "ms TTFT", "user_tokens_per_s": "tok/s", "group_tokens_per_s": "tok/s (group)",
         "gpu_tokens_per_s": "tok/s/GPU"}


def report(fams: list[Family], results: dict, markdown: bool) -> list[str]:
    out = []
    for fam in fams:
        res = results[fam.name]
        out.append(f"\n{fam.name}: constants (each inside its range)")
        out += [f"  {n} {v:.4g} (range {fam.ranges[fam.base(n)][0]:g}-{fam.ranges[fam.base(n)][1]:g}"
                f"{(' ' + fam.ranges[fam.base(n)][2]) if fam.ranges[fam.base(n)][2] else ''})"
                for n, v in zip(fam.names, res["x"])]
        out.append("| point | set | batch | measured | in-fit | LOSO | error in-fit | error LOSO | source |"
                   if markdown else
                   f"  {'point':<46} {'set':<8} {'batch':>6} {'measured':>20} {'in-fit':>9} {'LOSO':>9} "
                   f"{'err fit':>7} {'err LOSO':>8}")
        if markdown:
            out.append("|---|---|---|---|---|---|---|---|---|")
        for r in res["rows"]:
            w = r["work"]
            p = w.point
            e_fit, e_lo = error(w, r["fitted"]), error(w, r["loso"])
            cells = (p.id, p.set, str(w.requests), f"{p.value:,.6g} {UNITS[p.metric]}", _speed(w, r["fitted"]),
                     _speed(w, r["loso"]), "-" if e_fit is None else f"{e_fit:.2f}x",
                     "-" if e_lo is None else f"{e_lo:.2f}x" + ("*" if r.get("release_from_siblings") else ""))
            if markdown:
                out.append("| " + " | ".join(cells) + f" | {p.runtime} {p.version}, {p.date}; {p.publication} |")
            else:
                flag = f"  [{', '.join(p.unstated)} not stated]" if p.unstated else ""
                out.append(f"  {cells[0]:<46} {cells[1]:<8} {cells[2]:>6} {cells[3]:>20} {cells[4]:>9} "
                           f"{cells[5]:>9} {cells[6]:>7} {cells[7]:>8}{flag}")
        steps = [r for r in res["rows"] if not is_ttft(r["work"])]
        if any(r.get("release_from_siblings") for r in steps):
            out.append("  * its release's own constant is predicted from its publication's other points (no other "
                       "publication measured that release); every other constant from the other publications")
        for label, sel in (("fit points, leave-one-source-out", "fit"), ("held-out points", "held_out")):
            errs = [counted(r) for r in steps if r["work"].point.set == sel]
            out.append(f"  {label}: {summary(errs)}")
        ttft = [counted(r) for r in res["rows"] if is_ttft(r["work"])]
        if ttft:
            out.append(f"  TTFT points (never fitted; leave-one-source-out): {summary(ttft)}")
        fitted_on = {r["work"].point.hardware for r in steps if r["work"].point.set == "fit"}
        own = [counted(r) for r in steps if r["work"].point.set == "held_out"
               and r["work"].point.hardware in fitted_on]
        if len(own) < sum(r["work"].point.set == "held_out" for r in steps):
            out.append(f"  held-out points on the fitted devices ({', '.join(sorted(fitted_on))}): {summary(own)}")
        out.append(f"  all counted step points (TPOT and throughput): {summary([counted(r) for r in steps])}")
    return out


def families(points: list[Point]) -> list[Family]:
    gpus, wafers = [], []
    for p in points:
        if p.hardware not in (*GPU_SPECS, "mi300x", "wse-3"):
            continue
        try:
            w = work(p)
        except SystemExit as exc:       # an excluded point may not be expressible at all
            if p.set != "excluded":
                raise
            print(f"  excluded {p.id}: cannot be set up ({exc})")
            continue
        (wafers if p.wafer else gpus).append(w)
    wnames = wafer_names(wafers)
    return [Family("GPUs (h100, h200, b200 constants; mi300x points held out)", tuple(GPU_RANGES), GPU_RANGES,
                   gpu_predict, gpus),
            Family("WSE-3 wafers", wnames, WAFER_RANGES, wafer_predict_for(wnames), wafers)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write", action="store_true", help="write the perf blocks of the specs and the error bands")
    ap.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    args = ap.parse_args(argv)
    points = load_corpus(args.corpus)
    fams = families(points)
    results = {f.name: evaluate(f) for f in fams}
    for line in report(fams, results, args.markdown):
        print(line)
    for p in points:
        if p.set == "excluded":
            print(f"  excluded {p.id}: {p.note.split('. ')[0]}.")
    bad = [f"{fam.name}: {b}" for fam in fams for b in at_bounds(fam, results[fam.name]["x"])]
    if bad:
        print("error: fitted constants on a bound of their physical range (a missing term, not a calibration): "
              + "; ".join(bad), file=sys.stderr)
        return 1
    if args.write:
        from calibration_write import write_all
        write_all(fams, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
