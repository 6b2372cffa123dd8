"""Two-pool mappings in a runtime's form: each pool's command with the runtime's own
prefill/decode disaggregation flags, where the runtime has them.

* SGLang (``docs/advanced_features/pd_disaggregation.md``): ``--disaggregation-mode prefill`` /
  ``decode`` with ``--disaggregation-transfer-backend mooncake`` (or ``nixl``), and its router in
  front: ``python -m sglang_router.launch_router --pd-disaggregation --prefill URL --decode URL``;
* vLLM (``docs/features/nixl_connector_usage.md``): both instances with
  ``--kv-transfer-config '{"kv_connector": "NixlConnector", "kv_role": "kv_both"}'``; vLLM ships
  no production prefill/decode router (its examples hold a toy proxy), which the header says;
* ``json``: both pools' executor manifests with the replica counts;
* Megatron and torch pipelining are training and pipelining runtimes without a prefill/decode
  split: refused, saying so.

Each pool's command is its one-pool export (validated, the runtime's own parser run on it); a
pool runs as many copies as its replica count, one per set of devices. The decode command's
running-request limit is the live requests the plan holds at the TPOT target.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict, replace

from placer.export.stages import Export, ExportOptions, ExportRefused
from placer.mapping.view import PooledView

__all__ = ["export_pooled", "PD_FLAGS"]

VLLM_KV_TRANSFER = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
PD_FLAGS = {
    "sglang": {"prefill": ["--disaggregation-mode", "prefill", "--disaggregation-transfer-backend", "mooncake"],
               "decode": ["--disaggregation-mode", "decode", "--disaggregation-transfer-backend", "mooncake"]},
    "vllm": {pool: ["--kv-transfer-config", json.dumps(VLLM_KV_TRANSFER, separators=(",", ":"))]
             for pool in ("prefill", "decode")},
}
PORTS = {"prefill": 30000, "decode": 30001}


def _with_flags(text: str, extra: list[str]) -> str:
    """``text`` (an export) with ``extra`` appended to its launch line (the last line)."""
    lines = text.split("\n")
    lines[-1] = lines[-1] + " " + " ".join(shlex.quote(a) for a in extra)
    return "\n".join(lines)


def export_pooled(view: PooledView, fmt: str, export_one, *, model=None, source: str = "<mapping>",
                  options: ExportOptions | None = None) -> Export:
    """A two-pool mapping (:mod:`placer.mapping.pools`) in format ``fmt``, validated as a pair
    first; ``export_one(pool_view, fmt, model=, source=, options=)`` exports one pool
    (:func:`placer.export.export_mapping`)."""
    from placer.mapping.validate import validate_mapping

    options = options or ExportOptions()
    if fmt in ("megatron", "torch"):
        raise ExportRefused("--format", "format", f"{fmt} has no prefill/decode disaggregation: export a pool "
                                                  f"(its sub-document under /pools) on its own, or use sglang or vllm")
    violations = validate_mapping(view, model=model, source=source)
    if violations:
        raise ExportRefused(source, "-", f"the mapping has {len(violations)} violation(s) (first: {violations[0]}); "
                                         "run `placer validate` and re-solve before exporting")
    reps = view.replicas
    # a decode server admits only the live requests that keep the TPOT target (the plan's held
    # load), not all its KV reserve holds: its running-request limit is capped there
    held, ceiling = view.summary.decode_held, view.decode.summary.concurrency_ceiling
    decode = replace(view.decode, summary=replace(view.decode.summary,
                                                  concurrency_ceiling=held if ceiling is None else min(ceiling, held)))
    parts = {pool: export_one(sub, fmt, model=model, source=source, options=options)
             for pool, sub in (("prefill", view.prefill), ("decode", decode))}
    warnings = tuple(w for p in parts.values() for w in p.warnings)
    if fmt == "json":
        text = json.dumps({"kind": "disaggregated", "replicas": reps, "transfer": asdict(view.transfer),
                           "pools": {p: json.loads(e.text) for p, e in parts.items()}}, indent=2)
        return Export(text=text, warnings=warnings)
    if options.bare:
        return Export(text="\n".join(f"{p}: {e.text}" for p, e in parts.items()), warnings=warnings)
    t = view.transfer
    lines = [f"# disaggregated prefill/decode: {reps['prefill']} prefill and {reps['decode']} decode replica(s); "
             f"each prompt's KV ({t.bytes:,} B) moves prefill -> decode over {t.link}"]
    for pool, e in parts.items():
        extra = list(PD_FLAGS[fmt][pool]) + ["--port", str(PORTS[pool])]
        lines.append(f"# {pool} pool: run {reps[pool]} cop{'y' if reps[pool] == 1 else 'ies'} of this, each on "
                     f"its own devices")
        lines.append(_with_flags(e.text, extra))
    if fmt == "sglang":
        lines.append("# router: one --prefill and one --decode per replica")
        lines.append(shlex.join(["python", "-m", "sglang_router.launch_router", "--pd-disaggregation",
                                 "--prefill", f"http://PREFILL_HOST:{PORTS['prefill']}",
                                 "--decode", f"http://DECODE_HOST:{PORTS['decode']}"]))
    else:
        lines.append("# vLLM ships no production prefill/decode router: put a KV-connector-aware proxy in front "
                     "(its examples/online_serving disaggregated proxy, llm-d or Dynamo)")
    return Export(text="\n".join(lines), warnings=warnings)
