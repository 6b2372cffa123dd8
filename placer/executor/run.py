"""Drive a pipeline of stage workers with continuous batching, and check it against the reference.

:func:`execute` is the scheduler: it admits up to ``max_live`` requests, groups them in
micro-batches of up to ``micro_batch``, and keeps every micro-batch moving: when one comes back
from the last stage, each request in it gets its greedy token; finished requests are dropped and
their caches freed on every stage, waiting requests take their places (continuous batching), and
the micro-batch re-enters the pipeline. Prompts are fed one token per step through the same path.

:func:`run_placement` / :func:`run_mapping` build the tiny twin of a placement or a stage-mapping
document, execute it on a backend (``local`` threads or ``ray`` actors) as :class:`RunOptions` say,
run the unpartitioned reference, and report tokens, logits and per-stage memory against
:mod:`placer.problem.memory`.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from placer.executor.reference import ReferenceModel, Request, context_for, make_requests
from placer.executor.stage import StageStats
from placer.executor.tiny import Batch, TinySpec, expected_request_bytes, tiny_spec
from placer.specs.errors import ARGUMENT, InvalidSpec

__all__ = ["ExecResult", "RunOptions", "execute", "make_backend", "compare_with_reference", "run_placement",
           "run_mapping", "BACKENDS"]

BACKENDS = ("local", "ray", "torch")


@dataclass(frozen=True)
class RunOptions:
    """How to run a twin (``placer run``'s flags): the ``backend`` (Ray at ``address``), ``requests``
    seeded requests of up to ``tokens`` generated tokens each, ``micro_batch`` requests per
    micro-batch (None: the mapping's, 1 for a bare placement), at most ``max_live`` live at once
    (None: every request, or a mapping's concurrency ceiling), the ``seed``, the bits the caches
    are stored at, and whether to ``check`` against the single-process reference."""

    backend: str = "local"
    address: str | None = None
    requests: int = 32
    tokens: int = 8
    micro_batch: int | None = None
    max_live: int | None = None
    seed: int = 0
    kv_bits: int = 64
    state_bits: int = 64
    conv_state_bits: int = 64
    check: bool = True

    def __post_init__(self):
        if self.requests < 1:
            raise InvalidSpec(ARGUMENT, "requests", "must be at least 1")
        if self.tokens < 1:
            raise InvalidSpec(ARGUMENT, "tokens", "must be at least 1")
        for name in ("kv_bits", "state_bits", "conv_state_bits"):
            if getattr(self, name) not in (16, 32, 64):
                raise InvalidSpec(ARGUMENT, name, "the numeric executor stores 16, 32 or 64 bits")


@dataclass
class ExecResult:
    tokens: dict[int, list[int]]
    logits: dict[int, np.ndarray]
    stages: list[StageStats]
    backend: str
    micro_batch: int
    max_live: int
    peak_live: int
    max_in_flight: int
    passes: int
    seconds: float
    stats: dict = field(default_factory=dict)


def make_backend(name: str, spec: TinySpec, *, address: str | None = None):
    if name == "local":
        from placer.executor.local import LocalPipeline
        return LocalPipeline(spec)
    if name == "ray":
        from placer.executor.ray_backend import RayPipeline
        return RayPipeline(spec, address=address)
    raise InvalidSpec(ARGUMENT, "backend", f"unknown backend {name!r} (choose from {', '.join(BACKENDS)})")


def execute(spec: TinySpec, requests: Sequence[Request], *, backend: str = "local", micro_batch: int = 1,
            max_live: int | None = None, address: str | None = None) -> ExecResult:
    """Run ``requests`` through the pipeline of ``spec``; greedy tokens and logits per request."""
    if micro_batch < 1:
        raise InvalidSpec(ARGUMENT, "micro_batch", "must be at least 1")
    max_live = len(requests) if max_live is None else max_live
    if max_live < 1:
        raise InvalidSpec(ARGUMENT, "max_live", "must be at least 1")
    t0 = time.perf_counter()
    pipe = make_backend(backend, spec, address=address)
    by_id = {r.id: r for r in requests}
    pos = {r.id: 0 for r in requests}
    out: dict[int, list[int]] = {r.id: [] for r in requests}
    logits: dict[int, list[np.ndarray]] = {r.id: [] for r in requests}
    waiting = deque(r.id for r in requests)
    unbatched: deque[int] = deque()
    live: set[int] = set()
    peak_live = in_flight = max_in_flight = passes = 0
    next_mb = 0

    def admit():
        nonlocal peak_live
        while waiting and len(live) < max_live:
            rid = waiting.popleft()
            live.add(rid)
            unbatched.append(rid)
        peak_live = max(peak_live, len(live))

    def launch(mb: int, ids: list[int]):
        nonlocal in_flight, max_in_flight
        toks = []
        for rid in ids:
            r, p = by_id[rid], pos[rid]
            toks.append(r.prompt[p] if p < len(r.prompt) else out[rid][-1])
        pipe.submit(Batch(mb=mb, req_ids=list(ids), positions=np.array([pos[i] for i in ids]),
                          tokens=np.array(toks, dtype=np.int64)))
        in_flight += 1
        max_in_flight = max(max_in_flight, in_flight)

    try:
        admit()
        while unbatched:
            ids = [unbatched.popleft() for _ in range(min(micro_batch, len(unbatched)))]
            launch(next_mb, ids)
            next_mb += 1
        while in_flight:
            batch = pipe.next_done()
            in_flight -= 1
            passes += 1
            finished = []
            keep = []
            for row, rid in enumerate(batch.req_ids):
                r = by_id[rid]
                if pos[rid] >= len(r.prompt) - 1:
                    out[rid].append(int(batch.out_tokens[row]))
                    logits[rid].append(batch.logits[row].copy())
                pos[rid] += 1
                if len(out[rid]) >= r.max_new_tokens:
                    finished.append(rid)
                else:
                    keep.append(rid)
            if finished:
                pipe.free(finished)
                live.difference_update(finished)
            admit()
            while unbatched and len(keep) < micro_batch:
                keep.append(unbatched.popleft())
            if keep:
                launch(batch.mb, keep)
            while unbatched:
                ids = [unbatched.popleft() for _ in range(min(micro_batch, len(unbatched)))]
                launch(next_mb, ids)
                next_mb += 1
    finally:
        pipe.close()
    stages = pipe.stats()
    return ExecResult(tokens=out, logits={k: np.array(v) for k, v in logits.items()}, stages=stages,
                      backend=pipe.name, micro_batch=micro_batch, max_live=max_live, peak_live=peak_live,
                      max_in_flight=max_in_flight, passes=passes, seconds=time.perf_counter() - t0)


def compare_with_reference(spec: TinySpec, requests: Sequence[Request], result: ExecResult,
                           reference: dict | None = None) -> dict:
    """Tokens and logits of ``result`` against the single-process reference, and every stage's
    peak cache bytes against placer.problem.memory (bytes per live request x its peak live requests)."""
    if reference is None:
        reference = reference_run(spec, requests)
    mismatched = [r.id for r in requests if result.tokens[r.id] != reference[r.id][0]]
    diffs = [float(np.max(np.abs(result.logits[r.id] - reference[r.id][1]))) for r in requests
             if r.id not in mismatched]
    per_request = expected_request_bytes(spec)
    memory_rows = []
    for st in result.stages:
        expected = per_request[st.device] * st.peak_live_requests
        memory_rows.append(dict(device=st.device, peak_cache_bytes=st.peak_cache_bytes,
                                peak_live_requests=st.peak_live_requests,
                                request_bytes=per_request[st.device], expected_bytes=expected,
                                matches=st.peak_cache_bytes == expected))
    return dict(tokens_match=not mismatched, mismatched_requests=mismatched,
                max_logit_abs_diff=max(diffs, default=0.0),
                logits_match=bool(not mismatched and all(d <= 1e-6 for d in diffs)),
                memory=memory_rows, memory_match=all(r["matches"] for r in memory_rows))


def reference_run(spec: TinySpec, requests: Sequence[Request]) -> dict[int, tuple[list[int], np.ndarray]]:
    ref = ReferenceModel(spec)
    return {r.id: ref.generate(r.prompt, r.max_new_tokens) for r in requests}


def run_placement(nodes, route: Sequence[str], options: RunOptions = RunOptions(), *, model_name: str = "tiny",
                  base=None, reference: dict | None = None) -> dict:
    """Execute the tiny twin of nodes ``nodes`` on devices ``route`` as ``options`` say; the
    ``placer run`` report.

    ``base`` is the unrefined model (see :func:`~placer.executor.tiny.tiny_spec`); ``reference``
    a result of :func:`reference_run` for the same tiny model and requests, to reuse.
    """
    o = options
    reqs = make_requests(o.requests, o.tokens, seed=o.seed)
    spec = tiny_spec(nodes, route, seed=o.seed, context_tokens=context_for(reqs), kv_bits=o.kv_bits,
                     state_bits=o.state_bits, conv_state_bits=o.conv_state_bits, model_name=model_name,
                     base=base)
    result = execute(spec, reqs, backend=o.backend, micro_batch=1 if o.micro_batch is None else o.micro_batch,
                     max_live=o.max_live, address=o.address)
    doc = report(spec, reqs, result)
    if o.check:
        doc["check"] = compare_with_reference(spec, reqs, result, reference)
    return doc


def report(spec: TinySpec, reqs: Sequence[Request], result: ExecResult) -> dict:
    per_request = expected_request_bytes(spec)
    stages = []
    for k, st in enumerate(result.stages):
        row = st.to_dict()
        row["index"] = k
        row["request_bytes"] = per_request[st.device]
        stages.append(row)
    return dict(model=spec.model_name, backend=result.backend, requests=len(reqs),
                tokens_generated=sum(len(v) for v in result.tokens.values()),
                micro_batch=result.micro_batch, max_live=result.max_live, peak_live=result.peak_live,
                max_in_flight=result.max_in_flight, passes=result.passes, seconds=round(result.seconds, 3),
                nodes=len(spec.nodes), devices=len(spec.devices),
                tiny=dict(hidden=spec.hidden, vocab=spec.vocab, context_tokens=spec.context_tokens,
                          kv_bits=spec.kv_bits, state_bits=spec.state_bits,
                          conv_state_bits=spec.conv_state_bits, seed=spec.seed),
                stages=stages, outputs={str(r.id): result.tokens[r.id] for r in reqs})


def run_mapping(doc, options: RunOptions = RunOptions(), *, model=None, hardware=None) -> dict:
    """:func:`run_placement` for a one-pool stage mapping (``placer run MAPPING``: the document or its
    :func:`~placer.mapping.view.mapping_view`).

    ``model`` / ``hardware`` override the specs the mapping names. The micro-batch defaults to the
    mapping's, the live-request cap to its concurrency ceiling (at most the request count).
    ``backend="torch"`` runs the model's own transformers family instead of the numpy twin
    (:mod:`.torch_backend`; its own report).
    """
    from placer.mapping import instance_from_mapping
    from placer.mapping.view import MappingView, mapping_view

    view = mapping_view(doc)
    if not isinstance(view, MappingView):
        raise InvalidSpec("<mapping>", "/pools", "a two-pool mapping: run one pool's document")
    if options.backend == "torch":
        from placer.executor.torch_backend import run_torch_mapping

        return run_torch_mapping(view, options, model=model, hardware=hardware)
    _model, _fleet, wl, inst = instance_from_mapping(view.doc, model=model, hardware=hardware)
    if len(view.route) != inst.n_nodes:
        raise InvalidSpec("<mapping>", "route", f"expected {inst.n_nodes} devices, one per node")
    if options.micro_batch is None:
        options = replace(options, micro_batch=wl.micro_batch)
    ceiling = view.summary.concurrency_ceiling
    if options.max_live is None and isinstance(ceiling, int) and ceiling > 0:
        options = replace(options, max_live=min(ceiling, options.requests))
    return run_placement(inst.nodes, list(view.route), options, model_name=inst.model.name,
                         base=inst.base_model or inst.model)
