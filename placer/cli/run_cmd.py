from __future__ import annotations

import click

from placer.cli.common import echo_json, input_file, workload_text
from placer.executor.run import BACKENDS, RunOptions, run_mapping
from placer.mapping import read_mapping
from placer.specs.units import format_bytes, format_duration_us, plural


@click.command("run")
@click.argument("mapping", type=input_file)
@click.option("--backend", type=click.Choice(BACKENDS), default="local", show_default=True,
              help="local: one thread per stage; ray: one Ray actor per stage (pip install -e '.[ray]'); "
                   "torch: the model's own transformers family, tiny, one gloo process per stage "
                   "(pip install torch==2.13.0 -e '.[runtimes]').")
@click.option("--address", default=None, help="Ray cluster address (default: start a local Ray).")
@click.option("--requests", type=click.IntRange(1, 100000), default=32, show_default=True)
@click.option("--tokens", type=click.IntRange(1, 100000), default=8, show_default=True,
              help="Most tokens a request generates (each asks for a seeded count between T/2 and T).")
@click.option("--micro-batch", type=click.IntRange(1, 100000), default=None,
              help="Requests per micro-batch (default: the mapping's).")
@click.option("--max-live", type=click.IntRange(1, 10**9), default=None,
              help="Live requests at once (default: the mapping's concurrency ceiling, at most --requests).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--kv-bits", type=click.Choice(["16", "32", "64"]), default="64", show_default=True)
@click.option("--state-bits", type=click.Choice(["16", "32", "64"]), default="64", show_default=True)
@click.option("--conv-state-bits", type=click.Choice(["16", "32", "64"]), default="64", show_default=True)
@click.option("--no-check", is_flag=True, help="Skip the single-process reference run.")
@click.option("--model", "model_ref", default=None, help="Model spec (default: the one the mapping names).")
@click.option("--hardware", "-H", "hardware_ref", default=None,
              help="Hardware spec (default: the one the mapping names).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def run_command(mapping, backend, address, requests, tokens, micro_batch, max_live, seed, kv_bits, state_bits,
                conv_state_bits, no_check, model_ref, hardware_ref, as_json):
    """Execute MAPPING on a scaled-down numeric twin of its model (same layers, kinds, order and
    stage boundaries; hidden size 32) with one worker per stage, and check every request's greedy
    tokens against a single-process run of the same model. Exit 1 when anything differs."""
    doc = read_mapping(mapping)
    options = RunOptions(backend=backend, address=address, requests=requests, tokens=tokens, micro_batch=micro_batch,
                         max_live=max_live, seed=seed, kv_bits=int(kv_bits), state_bits=int(state_bits),
                         conv_state_bits=int(conv_state_bits), check=not no_check)
    rep = run_mapping(doc, options, model=model_ref, hardware=hardware_ref)
    check = rep.get("check")
    if backend == "torch":
        return _print_torch(rep, as_json)
    ok = check is None or (check["tokens_match"] and check["logits_match"] and check["memory_match"])
    if as_json:
        echo_json({**rep, "workload": doc["workload"]})
        return 0 if ok else 1
    click.echo(f"{rep['model']} (tiny twin: hidden {rep['tiny']['hidden']}, vocab {rep['tiny']['vocab']}, "
               f"{plural(rep['nodes'], 'node')}) on {plural(rep['devices'], 'stage')}, backend {rep['backend']}")
    click.echo(f"{rep['requests']} requests, {rep['tokens_generated']} tokens, micro-batch {rep['micro_batch']}, "
               f"up to {rep['max_live']} live (peak {rep['peak_live']}), up to {rep['max_in_flight']} "
               f"micro-batches in flight, {rep['passes']} pipeline passes, {format_duration_us(rep['seconds'] * 1e6)}")
    click.echo(f"placed for {workload_text(doc['workload'])}")
    rows = {r["device"]: r for r in (check or {}).get("memory", [])}
    click.echo(f"{'stage':>5} {'device':<8} {'nodes':>5} {'weights':>10} {'peak cache':>11} {'live':>5} "
               f"{'per request':>11}  accounting")
    for s in rep["stages"]:
        m = rows.get(s["device"])
        verdict = "-" if m is None else ("matches" if m["matches"] else f"expected {m['expected_bytes']:,} B")
        click.echo(f"{s['index']:>5} {s['device']:<8} {len(s['nodes']):>5} {format_bytes(s['weight_bytes']):>10} "
                   f"{s['peak_cache_bytes']:>11,} {s['peak_live_requests']:>5} {s['request_bytes']:>11,}  {verdict}")
    if check is not None:
        if check["tokens_match"]:
            click.echo(f"tokens: identical to the single-process reference for all {rep['requests']} requests; "
                       f"largest logit difference {check['max_logit_abs_diff']:.2e}")
        else:
            click.echo(f"tokens: {len(check['mismatched_requests'])} request(s) differ from the reference: "
                       f"{check['mismatched_requests'][:10]}")
        click.echo("cache and state memory: " + ("every stage matches placer's accounting" if check["memory_match"]
                                                 else "MISMATCH with placer's accounting"))
    return 0 if ok else 1


def _print_torch(rep: dict, as_json: bool) -> int:
    check = rep.get("check")
    ok = check is None or check["tokens_match"]
    if as_json:
        echo_json(rep)
        return 0 if ok else 1
    tiny = rep["tiny"]
    click.echo(f"{rep['model']} as a tiny {rep['family']} (hidden {tiny['hidden']}, vocab {tiny['vocab']}, "
               f"{tiny['layers']} layers, seed {tiny['seed']}) on {rep['processes']} gloo processes, backend torch")
    click.echo(f"{rep['requests']} requests in {rep['micro_batches']} micro-batches of up to {rep['micro_batch']}, "
               f"prompts of {rep['prompt_tokens']} tokens, {rep['tokens_per_request']} greedy tokens each, "
               f"{rep['seconds']} s")
    click.echo(f"{'stage':>5} {'device':<8} {'layers':>9} {'cache bytes':>12} {'placer':>12}")
    for s in rep["stages"]:
        a, b = s["layers"]
        click.echo(f"{s['index']:>5} {s['device']:<8} {f'{a}..{b - 1}':>9} {s['cache_bytes']:>12,} "
                   f"{s['placer_bytes']:>12,}")
    if check is not None:
        click.echo("tokens: identical to the unsplit model for all requests" if check["tokens_match"] else
                   f"tokens: {len(check['mismatched_requests'])} request(s) differ from the unsplit model: "
                   f"{check['mismatched_requests'][:10]}")
    return 0 if ok else 1
