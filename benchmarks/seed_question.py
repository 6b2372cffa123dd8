"""The worked example's open question, answered with today's serving: Kimi K3 at 256k on wafers,
on B200, on H200, and on wafers decoding with B200s prefilling, with speculative decoding and
disaggregated prefill/decode allowed; per per-user speed, which platform serves it with the most
tokens/s per MW, by what ratio, and the cost model's error beside each figure.

    python benchmarks/seed_question.py [--markdown]          # runs both frontiers (an hour or so on 2 cores)
    python benchmarks/seed_question.py --plain P.json --spec S.json [--markdown]

``--plain`` / ``--spec`` read the JSON of the two ``placer frontier`` runs this script would make
(the commands are printed); without them the script makes them through the library. Every point is
a validated placement simulated as ``placer frontier`` does; the table keeps, per speed floor and
platform, the point with the most tokens/s per MW among aggregated and disaggregated serving, with
and without drafts. The error column is computed here: the calibration's leave-one-out and
held-out errors for the platform (``benchmarks/calibrate_simulator.py``) and, for points with
drafts, the speculative checks (``benchmarks/check_speculation.py``), and for points that prefill,
the prefill check (``benchmarks/check_prefill.py``).
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent))
sys.path.insert(0, str(ROOT))

FLEETS = "wse-3t,b200,h200"
PREFILL = "b200"
PREFILL_RACKS = 16          # 128 B200s for the prefill pool (the decode fleets as the catalog holds them)
SPEEDS = (1000, 500, 100, 50)
CONTEXT = 262_144            # 256k tokens of KV per request at its last token
OUTPUT = 512                 # tokens generated per request
CACHED = 253_952             # of the 261,632-token prompt, the prefix cache holds all but 7,680
TTFT_MS = 2000
DRAFT = dict(tokens=3, method="eagle3", model="kimi-k3-eagle3", accept=2.4)
BASE = (f"kimi-k3-hf -H {FLEETS} --context {CONTEXT} --speeds {','.join(map(str, SPEEDS))} --weight-bits 4 "
        f"--kv-bits 8 --text-only --jobs 2 --output-tokens {OUTPUT} --cached-prompt {CACHED} "
        f"--max-ttft-ms {TTFT_MS} --disagg --prefill-hardware {PREFILL} --prefill-racks {PREFILL_RACKS} --json")
SPEC = (f" --spec-tokens {DRAFT['tokens']} --spec-method {DRAFT['method']} --draft-model {DRAFT['model']} "
        f"--spec-accept {DRAFT['accept']}")
GROUPS = {                   # the table's platforms: the frontier's platform names each covers
    "wafers (WSE-3T)": ("wse-3t", "wse-3t disagg"),
    "B200": ("b200", "b200 disagg"),
    "H200": ("h200", "h200 disagg"),
    "wafers decode + B200 prefill": ("wse-3t decode + b200 prefill",),
    "H200 decode + B200 prefill": ("h200 decode + b200 prefill",),
}


def run_frontier(args: str) -> dict:
    print(f"running: placer frontier {args}", file=sys.stderr)
    out = subprocess.run([sys.executable, "-m", "placer.cli", "frontier", *shlex.split(args)], check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout)


def model_errors() -> dict:
    """``{"gpu": (lo, hi, held_worst), "wafer": (...), "mtp": (lo, hi), "eagle": worst, "prefill":
    model / measured}`` from the calibration, the speculative checks and the prefill check, computed now."""
    import calibrate_simulator as cal
    import check_speculation as chk

    points = cal.load_corpus()
    out = {}
    for fam in cal.families(points):
        rows = cal.evaluate(fam)["rows"]
        loo = [cal.ratio(r["point"], r["loo"]) for r in rows if r["point"].set == "fit" and r["loo"] is not None]
        held = [cal.ratio(r["point"], r["fitted"]) for r in rows if r["point"].set == "held_out"]
        key = "wafer" if all(r["point"].wafer for r in rows) else "gpu"
        out[key] = (min(loo), max(loo), max(held, key=lambda e: max(e, 1 / e)))
    spec = [r for c in chk.CHECKS for r in chk.run(c)]
    mtp = [r["speedup_error"] for r in spec if "mtp" in r["id"]]
    out["mtp"] = (min(mtp), max(mtp))
    out["eagle"] = max(r["speedup_error"] for r in spec if "eagle3" in r["id"])
    import check_prefill

    out["prefill"] = max(r["error"] for r in check_prefill.rows())     # the better of the layouts tried
    return out


def error_text(row: dict, errs: dict) -> str:
    wafer_decode = row["platform"].startswith("wse-3t")
    lo, hi, held = errs["wafer" if wafer_decode else "gpu"]
    text = f"{lo:.2f}-{hi:.2f}x left out, {held:.2f}x held out"
    if row.get("spec_tokens"):
        text += ("; drafts unchecked on wafers" if wafer_decode else
                 f"; drafts {errs['mtp'][0]:.2f}-{errs['mtp'][1]:.2f}x (MTP) to {errs['eagle']:.2f}x (EAGLE-3)")
    if row.get("serving") == "disaggregated" or row.get("ttft_p99_us") is not None:
        text += f"; prefill {errs['prefill']:.2f}x (one GPU point)"
    return text


def _layout(r: dict) -> str:
    if r.get("serving") == "disaggregated":
        return f"{r['prefill_layout']} prefill + {r['decode_layout']} decode"
    tp = r.get("tp", 1)
    kind = " attention-dp" if r.get("attention_dp") else " ep" if r.get("ep") else ""
    return f"{r['devices']} devices" + (f" at tp {tp}{kind}" if tp > 1 else "")


def best_rows(docs: list[dict]) -> list[dict]:
    """Per speed and table platform, the qualifying point with the most tokens/s per MW (None: none
    qualifies; then the fastest point of that platform)."""
    rows = [dict(r, drafts=bool(r.get("spec_tokens"))) for d in docs for r in d["rows"]]
    out = []
    for floor in SPEEDS:
        for group, names in GROUPS.items():
            mine = [r for r in rows if r["platform"] in names and r.get("per_user_tokens_per_s") is not None]
            ok = [r for r in mine if r["valid"] and r.get("meets_ttft", True) and r["tokens_per_s_per_mw"]
                  and r["per_user_tokens_per_s"] >= floor]
            best = max(ok, key=lambda r: r["tokens_per_s_per_mw"], default=None)
            fastest = max(mine, key=lambda r: r["per_user_tokens_per_s"], default=None)
            out.append(dict(floor=floor, group=group, best=best, fastest=fastest))
    return out


def table(picked: list[dict], errs: dict, markdown: bool) -> list[str]:
    head = ["floor, tokens/s per user", "platform", "serving", "layout", "live (a replica; all of a two-pool plan)", "tokens/s per user",
            "tokens/s per MW", "vs leader", "model error"]
    lines = []
    for floor in SPEEDS:
        at = [p for p in picked if p["floor"] == floor]
        lead = max((p["best"]["tokens_per_s_per_mw"] for p in at if p["best"]), default=None)
        for p in sorted(at, key=lambda p: -(p["best"]["tokens_per_s_per_mw"] if p["best"] else -1)):
            r = p["best"]
            if r is None:
                f = p["fastest"]
                why = "no placement" if f is None else (f"not reached: {f['per_user_tokens_per_s']:,.0f} at best "
                                                        f"({_layout(f)}{', drafts' if f['drafts'] else ''})")
                lines.append([f"{floor:,}", p["group"], why, "", "", "", "", "", ""])
                continue
            serving = r.get("serving", "aggregated") + (", EAGLE-3 drafts" if r["drafts"] else "")
            lines.append([f"{floor:,}", p["group"], serving, _layout(r), str(r["live_per_replica"]),
                          f"{r['per_user_tokens_per_s']:,.0f}", f"{r['tokens_per_s_per_mw']:,.0f}",
                          f"{r['tokens_per_s_per_mw'] / lead:.2f}x", error_text(r, errs)])
    if markdown:
        return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(x) + " |" for x in lines]
    return ["  ".join(head)] + ["  ".join(x) for x in lines]


def sentences(picked: list[dict]) -> list[str]:
    out = []
    for floor in SPEEDS:
        at = sorted((p for p in picked if p["floor"] == floor and p["best"]),
                    key=lambda p: -p["best"]["tokens_per_s_per_mw"])
        if not at:
            out.append(f"At {floor:,} tokens/s per user no platform qualifies.")
            continue
        a = at[0]
        text = (f"At {floor:,} tokens/s per user, {a['group']} leads with {a['best']['tokens_per_s_per_mw']:,.0f} "
                f"tokens/s per MW")
        if len(at) > 1:
            b = at[1]
            text += (f", {a['best']['tokens_per_s_per_mw'] / b['best']['tokens_per_s_per_mw']:.2f}x "
                     f"{b['group']}")
        out.append(text + ".")
    return out


def plot(docs: list[dict], path: Path) -> None:
    """One curve per table platform through the Pareto points of all its rows (aggregated and
    disaggregated, with and without drafts), tokens/s per MW and per device against per user."""
    from placer.planning.studies.frontier import pareto
    from placer.plotting import plot_speed_frontiers, save

    rows = []
    for group, names in GROUPS.items():
        mine = [dict(r, platform=group) for d in docs for r in d["rows"] if r["platform"] in names
                and r["valid"] and r.get("meets_ttft", True) and r.get("per_user_tokens_per_s")]
        for r, front in zip(mine, pareto(mine)):
            r["pareto"] = front
        rows += mine
    save(plot_speed_frontiers(rows, speeds=SPEEDS, title=f"kimi-k3-hf at 256k, 4-bit weights, 8-bit KV, "
                                                          f"{OUTPUT} output tokens, prefix cache {CACHED:,} tokens, "
                                                          "drafts and disaggregation allowed"), path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plain", type=Path, help="JSON of the frontier without drafts (else it is run)")
    ap.add_argument("--spec", type=Path, help="JSON of the frontier with drafts (else it is run)")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--plot", type=Path, help="draw the platforms' frontiers to this PNG")
    args = ap.parse_args(argv)
    plain = json.loads(args.plain.read_text()) if args.plain else run_frontier(BASE)
    spec = json.loads(args.spec.read_text()) if args.spec else run_frontier(BASE + SPEC)
    errs = model_errors()
    picked = best_rows([plain, spec])
    if args.plot:
        plot([plain, spec], args.plot)
    for line in table(picked, errs, args.markdown):
        print(line)
    print()
    for s in sentences(picked):
        print(s)
    print(f"\nplacer frontier {BASE}\nplacer frontier {BASE}{SPEC}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
