"""The simulator's speculative decoding against published speeds, with the fitted constants as
the hardware specs hold them (nothing here is fitted).

    python benchmarks/check_speculation.py [--markdown]

Each check plans the deployment as measured through ``placer.plan`` (one tensor-parallel group,
the drafter on it), simulates it decode-only with and without the drafts at the measured batch,
and prints model / measured for the speed with drafts and for the speed-up. The acceptance length
is the one the source states (or, where it states none, the one named in the row), so a miss here
is the cost model's (draft passes, the (k + 1)-position verify), not the acceptance's.

* Llama-3.3-70B on 8 H100 (tp 8, 16-bit), SGLang, one request at a time: 88.61 tokens/s without
  and 234.5 with EAGLE-3 at 8 steps (top-k 8), acceptance length 5.88 (sgl-project/sglang pull
  request 4716, 2025-03-24; S). placer drafts a chain of 8 tokens (no top-k tree) with a one-layer
  EAGLE-3 head of the target's layer shape and a 32,000-token draft vocabulary (EAGLE-3's usual
  draft vocabulary; the head's own config is not in the source).
* DeepSeek-V3 on 8 H200 (tp 8, FP8), SGLang, with its MTP layer: 1.8x at batch 1 and 1.5x at
  batch 32 (SGLang's DeepSeek documentation; V), one draft step (``--speculative-num-steps 1``,
  as that page launches it); acceptance length 1.875, the DeepSeek-V3 report's 85-90% second-token
  acceptance (D). The page states no lengths: 1,024 in and out are taken.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from placer import Placement, Requirements, SolverSettings, SpecDecoding, load_fleet, plan  # noqa: E402
from placer.planning.speed import _simulate  # noqa: E402
from placer.specs.model import load_model, model_from_dict  # noqa: E402
from placer.specs.workload import workload_for  # noqa: E402

EAGLE3_70B = {
    # an EAGLE-3 head of Llama-3.3-70B's layer shape (hidden 8192, 64 query / 8 KV heads of 128,
    # MLP 28672) with a 32,000-token draft vocabulary, its input embedding the target's; EAGLE-3's
    # fc and doubled first-layer input are left out (no tensor-parallel rule for a total)
    "name": "llama-3.3-70b-eagle3", "source": "EAGLE-3 head of Llama-3.3-70B's layer shape (assumed)",
    "hidden_size": 8192, "vocab_size": 32000, "input_embedding": False, "num_layers": 1, "pattern": "A",
    "mixers": {"attention": {"type": "gqa", "num_heads": 64, "num_kv_heads": 8, "head_dim": 128}},
    "ffns": {"mlp": {"type": "dense", "intermediate_size": 28672}},
    "layer_types": {"A": {"mixer": "attention", "ffn": "mlp"}},
}

CHECKS = [
    dict(id="h100x8-llama-3.3-70b-eagle3-bs1", model="llama-3.1-70b", hardware="h100", weight_bits=16,
         kv_bits=16, isl=128, osl=256, batches=(1,), k=8, accept=5.88, method="eagle3", draft=EAGLE3_70B,
         measured={1: (234.5, 234.5 / 88.61)},
         source="sgl-project/sglang PR 4716 (S): 88.61 -> 234.5 tokens/s, H100 TP8, batch 1, 8 steps, topk 8"),
    dict(id="h200x8-deepseek-v3-mtp1", model=str(ROOT / "tests" / "fixtures" / "hf" / "deepseek-v3.json"),
         hardware="h200", weight_bits=8, kv_bits=16, isl=1024, osl=1024, batches=(1, 32), k=1, accept=1.875,
         method="mtp", draft=None, measured={1: (None, 1.8), 32: (None, 1.5)},
         source="SGLang DeepSeek documentation (V): 1.8x at batch 1, 1.5x at batch 32, H200 TP8"),
]


def run(check: dict) -> list[dict]:
    mtp = check["method"] == "mtp"
    model = load_model(check["model"], mtp=mtp)
    fleet = load_fleet(check["hardware"], racks=1)
    top = max(check["batches"])
    wl = workload_for(model, context=check["isl"] + check["osl"], concurrency=top, weight_bits=check["weight_bits"],
                      kv_bits=check["kv_bits"])
    draft = None if check["draft"] is None else model_from_dict(check["draft"], source=check["draft"]["source"])
    req = Requirements(placement=Placement(degrees=(8,), expert_parallel=False),
                       speculation=SpecDecoding(tokens=check["k"], method=check["method"], draft_model=draft,
                                                accept=check["accept"]))
    p = plan(model, fleet, wl, req, SolverSettings(method="dp"))
    if not p.feasible or p.result.devices_used != 8:
        raise SystemExit(f"error: {check['id']}: expected one group of 8, got {p.message or p.result.devices_used}")
    rows = []
    for b in check["batches"]:
        kw = dict(decode_only=True)
        with_spec = _simulate(p.instance, p.solved.per_group.assignment, b, check["osl"], **kw)
        without = _simulate(p.instance, p.solved.per_group.assignment, b, check["osl"], spec_k=0, **kw)
        speed, gain = check["measured"][b]
        model_gain = with_spec.per_user_tokens_per_s / without.per_user_tokens_per_s
        rows.append(dict(id=check["id"], batch=b, k=check["k"], accept=check["accept"],
                         model_tokens_per_s=with_spec.per_user_tokens_per_s,
                         model_plain_tokens_per_s=without.per_user_tokens_per_s, measured_tokens_per_s=speed,
                         model_speedup=model_gain, measured_speedup=gain,
                         speed_error=None if speed is None else with_spec.per_user_tokens_per_s / speed,
                         speedup_error=model_gain / gain, source=check["source"]))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    args = ap.parse_args(argv)
    rows = [r for c in CHECKS for r in run(c)]
    head = ["check", "batch", "k", "accept", "model tok/s (plain)", "measured tok/s", "error", "model speed-up",
            "measured speed-up", "error"]
    lines = []
    for r in rows:
        meas = "-" if r["measured_tokens_per_s"] is None else f"{r['measured_tokens_per_s']:,.1f}"
        err = "-" if r["speed_error"] is None else f"{r['speed_error']:.2f}x"
        lines.append([r["id"], str(r["batch"]), str(r["k"]), f"{r['accept']:g}",
                      f"{r['model_tokens_per_s']:,.1f} ({r['model_plain_tokens_per_s']:,.1f})", meas, err,
                      f"{r['model_speedup']:.2f}x", f"{r['measured_speedup']:.2f}x", f"{r['speedup_error']:.2f}x"])
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for x in lines:
            print("| " + " | ".join(x) + " |")
    else:
        for x in [head, *lines]:
            print("  ".join(x))
    for c in CHECKS:
        print(f"{c['id']}: {c['source']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
