"""The measured corpus of ``benchmarks/data/calibration.yaml`` and each point's work, set up as measured.

Every point becomes placer's catalog model (or one of :data:`CAL_MODELS`) on its hardware spec, at
its precision, tensor / expert / attention-data parallel layout (GPUs) or wafer pipeline, and one
forward pass of the serving loop it measured is priced by the simulator's own cost model
(:mod:`placer.simulate.cost`): the decode step of its batch plus the prompt tokens the loop mixes
into each step (a closed loop of C requests starts a prompt every osl / C steps), as
:class:`placer.simulate.cost.Terms` that do not depend on any fitted constant. The calibration
(``benchmarks/calibrate_simulator.py``) then prices those terms at candidate constants.

Every metric is turned into the time of one step of the group (microseconds): TPOT; 1 / one user's
speed; for offline throughput rows, the batch / the group's output tokens per second.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from placer import load_model, make_instance, workload_for  # noqa: E402
from placer.algorithms import place  # noqa: E402
from placer.problem.instance import Layout  # noqa: E402
from placer.simulate import segments_of  # noqa: E402
from placer.simulate.cost import cached_tokens  # noqa: E402
from placer.simulate.prefill import Chunk, chunk_terms, merged  # noqa: E402
from placer.specs.fleet import fleet_from_dict  # noqa: E402
from placer.specs.spec_io import load_yaml_or_json  # noqa: E402

CORPUS = ROOT / "benchmarks" / "data" / "calibration.yaml"
SETS = ("fit", "held_out", "flagged", "excluded")
METRICS = ("tpot_ms", "user_tokens_per_s", "group_tokens_per_s", "gpu_tokens_per_s", "ttft_ms")
# the prompt tokens one prefill step runs for a TTFT point whose ``chunked_prefill_size`` is not
# stated (D): SGLang's chunked prefill size and vLLM's API-server token budget on 80 GB-class and
# larger GPUs (project serving reference, section 2); a point gives its run's own where known
PREFILL_BUDGET = 8192
# SGLang's overlap scheduler (on by default; ``--disable-overlap-schedule`` turns it off): an
# iteration receives requests, launches its batch behind the one already queued on the GPU, then
# waits for that one's result, so a request received at an iteration's start runs its prefill only
# after the decode step then in flight (scheduler.py event_loop_overlap): one decode step more
# than a loop that receives between steps
OVERLAP_STEPS = {"sglang": 1}
# SGLang runs prefill (extend) batches eagerly, without CUDA graphs (piecewise prefill graphs are
# opt-in, --enable-piecewise-cuda-graph, and not set by the corpus' runs): a prefill step cannot take
# less than the host's time to launch its kernels. Measured: DeepSeek-V3 (61 layers), a prefill of
# one new token, "forward cost 82.6 ms" eager against 23.1 ms replayed from a graph
# (sgl-project/sglang pull request 12160, 2025-10); per layer of the model (a measured assumption,
# not fitted: the TTFT points come from one publication's runs)
EAGER_PREFILL_US_PER_LAYER = {"sglang": 82_600 / 61}
# measured requests per concurrency slot of an InferenceX run ("2 x concurrency warmups and 10 x
# concurrency measured requests", InferenceX's method as its issue 2315 states it): the run's first
# C requests arrive together, one in this many
BENCH_ROUNDS = 10
REQUIRED = ("id", "set", "hardware", "model", "weight_bits", "kv_bits", "isl", "osl", "concurrency", "metric",
            "value", "speculative", "status", "source")
# offline maximum-throughput rows: the batch the runtime holds (D): requests whose whole isl + osl
# KV fits in this share of the memory the weights leave (TensorRT-LLM's kv_cache_free_gpu_mem_fraction
# default and its GUARANTEED_NO_EVICT scheduler), at most this many (an assumed max_batch_size)
SATURATE_KV_FRACTION = 0.9
SATURATE_MAX_BATCH = 2048
UNIT_PERF = dict(fixed_overhead_us_per_layer=0.0, fixed_overhead_us_per_stage=0.0, bandwidth_efficiency=1.0,
                 compute_efficiency=1.0, expert_bandwidth_efficiency=1.0, collective_latency_us=0.0)


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
    concurrency: int | str
    metric: str
    value: float
    speculative: str
    status: str
    source: str
    tp: int = 1
    ep: bool = False
    attention_dp: bool = False
    wafers: int | None = None
    release: str | None = None
    runtime: str = ""
    version: str = ""
    date: str = ""
    publication: str = ""
    unstated: tuple[str, ...] = ()
    note: str = ""
    chunked_prefill_size: int | None = None    # TTFT points: the run's prefill step size (tokens)
    scheduler_recv_interval: int = 1           # TTFT points: SGLang receives new requests every this many decode steps

    @property
    def wafer(self) -> bool:
        return self.hardware.startswith("wse")


def _publication(raw: dict) -> str:
    """A point's publication (the unit leave-one-source-out holds out): its ``publication`` field,
    or the last address its source names."""
    if raw.get("publication"):
        return str(raw["publication"])
    words = [w.rstrip(";,.)") for w in str(raw["source"]).split() if "http" in w or ".com" in w or ".ai/" in w]
    return words[-1] if words else str(raw["source"])[:60]


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
        for k in ("chunked_prefill_size", "scheduler_recv_interval"):
            if k in raw and not (isinstance(raw[k], int) and raw[k] >= 1):
                raise SystemExit(f"error: {where} ({raw['id']}): {k}: a positive integer")
        if raw["id"] in seen:
            raise SystemExit(f"error: {where}: id: {raw['id']!r} appears twice")
        if not float(raw["value"]) > 0:
            raise SystemExit(f"error: {where} ({raw['id']}): value: must be positive")
        if not (raw["concurrency"] == "saturate" or (isinstance(raw["concurrency"], int) and raw["concurrency"] >= 1)):
            raise SystemExit(f"error: {where} ({raw['id']}): concurrency: a count or 'saturate'")
        seen.add(raw["id"])
        kw = {k: raw[k] for k in Point.__dataclass_fields__ if k in raw and raw[k] is not None}
        kw["unstated"] = tuple(raw.get("unstated") or ())
        kw["date"], kw["release"] = str(raw.get("date", "")), (str(raw["release"]) if raw.get("release") else None)
        kw["value"], kw["publication"] = float(raw["value"]), _publication(raw)
        out.append(Point(**kw))
    return out


# Models of corpus points that placer's catalog does not ship, from their Hugging Face config.json.
# Qwen/Qwen3-32B: hidden 5120, 64 layers, 64 query / 8 KV heads of 128, intermediate 25600, vocabulary
# 151,936, untied. meta-llama/Llama-4-Maverick-17B-128E: hidden 5120, 48 layers alternating a dense
# MLP (intermediate_size_mlp 16384) and an MoE of 128 experts, top-1, one shared expert
# (intermediate 8192), 40 query / 8 KV heads of 128, vocabulary 202,048. GLM-4.7 (GLM-4.5's
# architecture, zai-org/GLM-4.5 config.json; GLM-4.6 the same): hidden 5120, 92 layers, the first 3 dense
# (intermediate 12288), then MoE of 160 experts, top-8, one shared expert (intermediate 1536),
# 96 query / 8 KV heads of 128, vocabulary 151,552.
CAL_MODELS = {
    "qwen3-32b": {"name": "qwen3-32b", "hidden_size": 5120, "vocab_size": 151936, "tie_word_embeddings": False,
                  "num_layers": 64, "pattern": "A*64",
                  "mixers": {"attention": {"type": "gqa", "num_heads": 64, "num_kv_heads": 8, "head_dim": 128,
                                           "qk_norm": True}},
                  "ffns": {"mlp": {"type": "dense", "intermediate_size": 25600}},
                  "layer_types": {"A": {"mixer": "attention", "ffn": "mlp"}}},
    "llama-4-maverick": {
        "name": "llama-4-maverick", "hidden_size": 5120, "vocab_size": 202048, "tie_word_embeddings": False,
        "num_layers": 48, "pattern": "(D M)*24",
        "mixers": {"attention": {"type": "gqa", "num_heads": 40, "num_kv_heads": 8, "head_dim": 128}},
        "ffns": {"mlp": {"type": "dense", "intermediate_size": 16384},
                 "moe": {"type": "moe", "num_experts": 128, "experts_per_token": 1, "moe_intermediate_size": 8192,
                         "num_shared_experts": 1}},
        "layer_types": {"D": {"mixer": "attention", "ffn": "mlp"}, "M": {"mixer": "attention", "ffn": "moe"}}},
    "glm-4.7": {
        "name": "glm-4.7", "hidden_size": 5120, "vocab_size": 151552, "tie_word_embeddings": False,
        "num_layers": 92, "pattern": "D*3 M*89",
        "mixers": {"attention": {"type": "gqa", "num_heads": 96, "num_kv_heads": 8, "head_dim": 128}},
        "ffns": {"mlp": {"type": "dense", "intermediate_size": 12288},
                 "moe": {"type": "moe", "num_experts": 160, "experts_per_token": 8, "moe_intermediate_size": 1536,
                         "num_shared_experts": 1}},
        "layer_types": {"D": {"mixer": "attention", "ffn": "mlp"}, "M": {"mixer": "attention", "ffn": "moe"}}},
}
CAL_MODELS["glm-4.6"] = dict(CAL_MODELS["glm-4.7"], name="glm-4.6")     # GLM-4.6 keeps GLM-4.5's architecture too


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
    """(instance, assignment) of ``point`` as measured, on its hardware with ``perf`` (the workload
    holds one request: the batch is priced by :func:`work`, not placed)."""
    model = model_of(point.model)
    fleet = fleet_with_perf(point.hardware, perf)
    conc = point.tp if point.attention_dp else 1
    wl = workload_for(model, context=point.isl + point.osl, concurrency=conc,
                      weight_bits=point.weight_bits, kv_bits=point.kv_bits)
    inst = make_instance(model, fleet, wl, mode="contiguous",
                         layout=Layout(tp=point.tp, ep=point.ep, attention_dp=point.attention_dp))
    res = place(inst, method="dp")
    if res.assignment is None:
        raise SystemExit(f"error: {point.id}: no placement of {point.model} on {point.hardware}")
    if point.wafers is not None and res.devices_used != point.wafers:
        raise SystemExit(f"error: {point.id}: wafers: the fewest-wafer placement uses {res.devices_used}, "
                         f"the deployment {point.wafers}")
    if not point.wafer and res.devices_used != 1:
        raise SystemExit(f"error: {point.id}: expected one device group, the placement uses {res.devices_used}")
    return inst, res.assignment


def batch_of(point: Point, seg, inst) -> tuple[int, int]:
    """(requests one rank's step decodes, requests the whole group holds) for ``point``."""
    ranks = point.tp if point.attention_dp else 1
    if point.concurrency != "saturate":
        return math.ceil(point.concurrency / ranks), point.concurrency
    dev = inst.devices[seg.device].type
    weights = sum(c.weight_bytes for c in seg.costs)
    kv = sum(c.kv_bytes_per_token for c in seg.costs)
    free = SATURATE_KV_FRACTION * (dev.memory_bytes - weights)     # one rank's share of weights and KV
    b = max(1, min(SATURATE_MAX_BATCH, int(free // (kv * (point.isl + point.osl)))))
    return b, b * ranks


@dataclass(frozen=True)
class Work:
    """A point's step, ready to be priced: the GPU group's segment and its terms, or a wafer route."""

    point: Point
    measured_us: float        # the measured time of one step of the group
    segments: tuple
    terms: tuple              # per segment: Terms of one step
    batch: int                # requests one rank decodes per step
    requests: int             # requests the group holds
    devices: int              # GPUs of the group, or wafers
    peaks: tuple              # per segment: (memory bandwidth bytes/us, GEMM FLOP/us at the point's precision,
                              # attention FLOP/us: the 16-bit peak)
    steps: tuple = ()         # TTFT points: the Step objects behind the mean time to first token


@dataclass(frozen=True)
class Step:
    """One forward pass behind a TTFT point: ``share`` of the requests wait on it (a weight of the
    mean), it runs ``terms`` with ``decodes`` requests decoding; a prefill step takes at least
    ``floor_us`` (the runtime's eager launch time), less the decode step in flight when it was
    launched (``after_decode``: the launch overlaps that step)."""

    share: float
    terms: object
    decodes: int
    floor_us: float = 0.0
    after_decode: bool = False


def _measured_us(p: Point, requests: int, devices: int) -> float:
    if p.metric in ("tpot_ms", "ttft_ms"):
        return p.value * 1e3
    if p.metric == "user_tokens_per_s":
        return 1e6 / p.value
    total = p.value * (devices if p.metric == "gpu_tokens_per_s" else 1)
    return requests * 1e6 / total


def work(point: Point) -> Work:
    """:class:`Work` of ``point`` (its terms at the mean context isl + osl / 2)."""
    inst, assignment = setup(point, UNIT_PERF)
    segs = segments_of(inst, assignment)
    peaks = tuple((s.bytes_per_us, s.flops_per_us, s.attention_flops_per_us or s.flops_per_us) for s in segs)
    ctx = point.isl + point.osl // 2
    if point.wafer:
        terms = tuple(s.terms_for(1, cached_tokens([ctx], s.windows())) for s in segs)
        return Work(point, _measured_us(point, 1, len(segs)), tuple(segs), terms, 1, 1, len(segs), peaks)
    (s,) = segs
    b, requests = batch_of(point, s, inst)
    decode = s.terms_for(b, cached_tokens([ctx] * b, s.windows()))
    share = b / point.osl                 # prompts a closed loop starts per step
    pf = chunk_terms(s, (Chunk(0, point.isl),), b)
    scaled = replace(pf, bytes=pf.bytes * share, flops=pf.flops * share, comm_us=pf.comm_us * share,
                     expert_bytes=pf.expert_bytes * share, weight_bytes=pf.weight_bytes * share,
                     gemm_flops=pf.gemm_flops * share, expert_flops=pf.expert_flops * share,
                     tokens=point.isl * share)
    devices = len(inst.members(s.device))
    if point.metric == "ttft_ms":
        return Work(point, _measured_us(point, requests, devices), (s,), (decode,), b, requests, devices, peaks,
                    steps=ttft_steps(s, point.isl, requests, decode,
                                     budget=point.chunked_prefill_size or PREFILL_BUDGET,
                                     recv_interval=point.scheduler_recv_interval,
                                     overlap=OVERLAP_STEPS.get(point.runtime, 0),
                                     floor_us=EAGER_PREFILL_US_PER_LAYER.get(point.runtime, 0.0) * s.layers))
    return Work(point, _measured_us(point, requests, devices), (s,), (merged(s, decode, scaled),), b, requests,
                devices, peaks)


def ttft_steps(seg, isl: int, requests: int, decode, budget: int = PREFILL_BUDGET,
               rounds: int = BENCH_ROUNDS, recv_interval: int = 1, overlap: int = 0,
               floor_us: float = 0.0) -> tuple:
    """The steps behind a closed loop's mean time to first token, as :class:`Step` objects;
    ``decode`` is the Terms of a decode step of the C = ``requests`` requests.

    * The run's first C requests arrive together (one request in ``rounds``): their prompts
      (C x isl tokens, in arrival order) are prefilled in steps of at most ``budget`` tokens, no
      request decoding yet; a request's first token comes with the step that holds its last prompt
      token.
    * The others arrive one at a time as a request finishes (output lengths vary, so the loop does
      not move in waves). Each waits for the scheduler to receive it, which it does every
      ``recv_interval`` decode steps (SGLang's ``--scheduler-recv-interval``, 1 by default: half an
      interval on average), then for ``overlap`` decode steps already queued (SGLang's overlap
      scheduler: 1), then its own prefill step (SGLang runs prefill batches apart from decode
      batches by default).
    * A prefill step takes at least ``floor_us`` (the runtime's eager launch time); the lone
      prefill's launch overlaps the decode step it waits behind when ``overlap`` is on."""
    steady = 1.0 - 1.0 / rounds
    out = [Step(steady * (recv_interval / 2 + overlap), decode, requests),
           Step(steady, chunk_terms(seg, (Chunk(0, isl),), 0), 0, floor_us, after_decode=overlap > 0)]
    total = isl * requests
    done_at = [-(-(j * isl) // budget) for j in range(1, requests + 1)]      # step (1-based) of each first token
    start = 0
    for k in range(1, done_at[-1] + 1):
        end = min(start + budget, total)
        chunks = []
        for r in range(start // isl, -(-end // isl)):
            a, z = max(start, r * isl), min(end, (r + 1) * isl)
            chunks.append(Chunk(a - r * isl, z - a))
        out.append(Step(sum(d >= k for d in done_at) / requests / rounds, chunk_terms(seg, chunks, 0), 0, floor_us))
        start = end
    return tuple(out)
