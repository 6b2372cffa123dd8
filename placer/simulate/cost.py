"""The simulator's cost model: how long one device visit and one hop take in decode.

A placement's route is cut into *segments*, maximal runs of consecutive nodes on one device (a
contiguous placement has one per stage; a free placement that returns to a device has more).
One decode step of a micro-batch of ``b`` requests with KV lengths ``c_1..c_b`` spends on a segment

    t = O_stage + (O_layer + O_req * b) * L + O_moe * L_moe
        + the operations of its nodes, each at its own roofline (:func:`roofline_us`): dense weight
          GEMMs over D_n / (BW * eta_bw) and F_n / (C * eta_c), attention over its KV bytes and its
          FLOPs at the 16-bit peak, routed experts over X_n / (BW * eta_moe) and their FLOPs
        + sum over the segment's collectives of their time (device groups: TP all-reduce, EP all-to-all)

with the device type's ``perf`` constants (the hardware spec keeps them, fitted by
``benchmarks/calibrate_simulator.py`` to the measured corpus ``benchmarks/data/calibration.yaml``;
``docs/cost_model.md`` explains each term):

* ``fixed_overhead_us_per_stage`` O_stage: what a device visit costs whatever it runs (on a wafer:
  the per-wafer cost of getting a token's activation in, through and out of the wafer);
* ``fixed_overhead_us_per_layer`` O_layer and ``fixed_overhead_us_per_layer_per_request`` O_req:
  the per-layer cost of a step, growing with the batch (kernel launches replayed from a CUDA
  graph; each request's hidden state read and written by the norms, residual adds, rotary and
  activation quantisation, whole on every tensor-parallel rank; on a wafer the latency of a
  layer's reductions across its region of cores);
* ``fixed_overhead_us_per_moe_layer`` O_moe: what a routed-expert layer adds (router, top-k,
  token permutation, the grouped GEMM's launch) over the L_moe MoE layers the segment runs;
* ``bandwidth_efficiency`` eta_bw: the fraction of the memory bandwidth BW that dense weight, KV
  and state reads reach; ``expert_bandwidth_efficiency`` eta_moe the fraction the routed experts'
  reads reach (grouped GEMMs over a few tokens per expert; default eta_bw);
* ``compute_efficiency`` eta_c against the peak compute C (the dense 8-bit peak ``compute_fp8``
  when the weights are 8 bits or fewer and the spec gives it, times ``compute_fp4_speedup`` for
  weights of 4 bits or fewer: :func:`compute_flops`); attention's FLOPs run at the 16-bit peak
  whatever the weights (the runtimes' attention kernels do 16-bit math on the KV);
* ``collective_latency_us``: the fixed time of one collective of a device group (a one-shot or
  two-shot all-reduce kernel, an all-to-all launch); without it a collective pays the link latency
  at every ring step (see :func:`collective_time_us`); ``collective_bandwidth_efficiency``: the
  share of the link's bandwidth its bytes reach (NCCL's bus bandwidth against the link's).

L is the model layers the segment runs: parts of one layer (shards, mixer and expert groups after
refining) on one device count once, a layer whose parts sit on two devices pays the overhead on
each. The terms add (no overlap assumed):

* bytes read: D_n = dense weights the micro-batch touches + KV read + state read and written;
  X_n = the routed experts' weights: an MoE node reads its always-resident part (in D_n) plus the
  experts the micro-batch touches, each once, ``E (1 - (1 - k/E)^b)`` of them on average for
  uniform routing (a node that lost its expert structure, such as a shard, reads
  ``min(all, b x active)`` as dense); a dense node reads its active weights once per micro-batch
  (embedding: one row per token); KV: ``kv_bytes_per_token x min(c_i, window)`` per request;
  state: twice the request's state bytes;
* FLOPs F_n = ``2 x active params`` per request + 2 per cached KV element read (scores and
  values) + 4 per recurrent-state element (decay, update, read-out).

A hop costs the link's latency plus the activation bytes of the micro-batch over the link's
bandwidth (when the fleet gives one): on wafers this is the wafer-to-wafer transfer of the
activation. A segment on a group of devices adds its collectives (:class:`Collective`, timed by
:func:`collective_time_us`; :func:`tensor_parallel` and :func:`expert_parallel` build the usual
ones); a segment on one device has none. Everything is in microseconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from placer.problem import memory
from placer.problem.instance import Instance
from placer.specs.errors import InvalidSpec

__all__ = ["NodeCost", "Segment", "segments_of", "node_cost", "Terms", "cached_tokens", "collective_time_us",
           "Collective", "COLLECTIVES", "tensor_parallel", "expert_parallel", "attention_data_parallel",
           "compute_flops", "group_collectives"]


@dataclass(frozen=True)
class NodeCost:
    """Per-node inputs of the cost model, in bytes and FLOPs, at the instance's workload."""

    name: str
    weight_bytes: int              # all weights of the node
    active_weight_bytes: int       # weights one token reads
    always_bytes: int = 0          # MoE: router + shared experts + mixer part (read every step)
    expert_bytes: int = 0          # MoE: one routed expert
    expert_params: int = 0         # MoE: one routed expert's parameters
    num_experts: int = 0
    experts_per_token: int = 0
    kv_bytes_per_token: int = 0
    kv_elements_per_token: int = 0
    kv_window: int | None = None
    attention_flops_per_kv: float = 2.0   # FLOPs per cached KV element read, per query token (see _attention_flops)
    mha_flops_per_pair: float = 0.0       # MLA prefill un-absorbed: FLOPs per (query, key) pair (see _mha_flops)
    mha_flops_per_cached: float = 0.0     # ... and per cached position its latent is up-projected for, per chunk
    state_bytes: int = 0           # per request
    state_elements: int = 0
    active_params: int = 0
    activation_bytes_per_token: int = 0

    def weight_bytes_read(self, b: int) -> float:
        """Weight bytes a micro-batch of ``b`` requests reads (expected, for MoE)."""
        if b <= 0:
            return 0.0
        if self.num_experts and self.experts_per_token:
            e, k = self.num_experts, self.experts_per_token
            touched = e * (1.0 - (1.0 - k / e) ** b)
            return float(min(self.weight_bytes, self.always_bytes + touched * self.expert_bytes))
        return float(min(self.weight_bytes, b * self.active_weight_bytes))

    def expert_bytes_read(self, b: int) -> float:
        """The routed experts' share of :meth:`weight_bytes_read` (0 for a node without experts):
        every expert the micro-batch touches is read once, whatever the tokens routed to it."""
        if b <= 0 or not (self.num_experts and self.experts_per_token):
            return 0.0
        return max(0.0, self.weight_bytes_read(b) - self.always_bytes)


def _attention_flops(layer, heads_split: int) -> float:
    """FLOPs one query token spends per cached KV element of ``layer`` (scores and values):
    GQA / MHA: ``2 x query heads / KV heads`` (every query head of a group reads the group's K and V);
    MLA (absorbed, the runtimes' decode kernel): every head scores the whole latent plus its rotary
    part and reads the latent back, ``heads x 2 (2 r + rope) / (r + rope)`` with r the latent rank,
    ``heads`` the query heads one rank runs (divided by ``heads_split``, the tensor-parallel degree);
    other mixers 2."""
    d = dict(layer.mixer_dims or ())
    if d.get("kv_lora_rank"):
        r, rope = d["kv_lora_rank"], d.get("qk_rope_head_dim", 0)
        heads = d["num_heads"] / max(heads_split, 1)
        return heads * 2.0 * (2 * r + rope) / max(layer.kv_elements_per_token, r + rope)
    if d.get("num_heads") and d.get("num_kv_heads"):
        return 2.0 * d["num_heads"] / d["num_kv_heads"]
    return 2.0


def _mha_flops(layer, heads_split: int) -> tuple[float, float]:
    """MLA prefill in its un-absorbed (MHA) form, as the runtimes run a prompt chunk (vLLM's MLA
    prefill path, SGLang's MHA and MHA_CHUNKED_KV forward methods, TensorRT-LLM's context phase):
    the latent is up-projected to per-head keys and values, and every head scores ``dn + dr`` and
    reads ``dv`` per (query, key) pair: ``heads x 2 (dn + dr + dv)`` FLOPs a pair (DeepSeek-V3:
    ``128 x 640`` against the absorbed form's ``128 x 2 (2 r + dr) = 128 x 2,176``); a cached
    prefix's latent is up-projected once per chunk, ``heads x 2 r (dn + dv)`` FLOPs a position
    (the new tokens' up-projection is in the layer's active parameters). ``(0, 0)`` for other
    mixers; ``heads`` the query heads one rank runs."""
    d = dict(layer.mixer_dims or ())
    if not (d.get("kv_lora_rank") and d.get("v_head_dim")):
        return 0.0, 0.0
    heads = d["num_heads"] / max(heads_split, 1)
    dn, dr, dv = d.get("qk_nope_head_dim", 0), d.get("qk_rope_head_dim", 0), d["v_head_dim"]
    return heads * 2.0 * (dn + dr + dv), heads * 2.0 * d["kv_lora_rank"] * (dn + dv)


def node_cost(instance: Instance, i: int) -> NodeCost:
    layer, wl = instance.nodes[i], instance.workload
    total = memory.weight_bytes(layer, wl)
    if layer.weight_bytes_fixed is not None and layer.params:
        active = -(-total * layer.active_params // layer.params)
    elif layer.weight_bytes_fixed is not None:
        active = total
    else:
        active = memory.bits_to_bytes(layer.active_params, wl.weight_bits)
    active = min(active, total)
    kw: dict = {}
    if layer.num_experts and layer.expert_params and layer.part is None:
        # k from the counts: active = everything but the routed experts + k experts
        routed = layer.num_experts * layer.expert_params
        k = round((layer.active_params - (layer.params - routed)) / layer.expert_params)
        if 1 <= k <= layer.num_experts:
            kw = dict(num_experts=layer.num_experts, experts_per_token=k,
                      expert_bytes=memory.bits_to_bytes(layer.expert_params, wl.weight_bits),
                      expert_params=layer.expert_params,
                      always_bytes=memory.bits_to_bytes(layer.params - routed, wl.weight_bits))
    split = 1 if instance.attention_dp else (instance.layout.tp if instance.layout else 1)
    mha = _mha_flops(layer, split)
    return NodeCost(name=layer.name, weight_bytes=total, active_weight_bytes=active,
                    kv_bytes_per_token=memory.kv_bytes_per_token(layer, wl),
                    kv_elements_per_token=layer.kv_elements_per_token, kv_window=layer.kv_window,
                    attention_flops_per_kv=_attention_flops(layer, split),
                    mha_flops_per_pair=mha[0], mha_flops_per_cached=mha[1],
                    state_bytes=memory.state_bytes_per_request(layer, wl),
                    state_elements=layer.state_elements_per_request + layer.conv_state_elements_per_request,
                    active_params=layer.active_params,
                    activation_bytes_per_token=memory.activation_bytes_per_token(layer, wl), **kw)


@dataclass(frozen=True)
class Terms:
    """A step's work on a segment, by operation (see :func:`roofline_us` for its time):

    * ``bytes``: dense reads (weights, KV, state), of which ``weight_bytes`` are the dense weights;
    * ``flops``: every FLOP but the routed experts', of which ``gemm_flops`` are the dense weight
      GEMMs' (the rest: attention over the KV read, recurrent-state updates);
    * ``expert_bytes`` / ``expert_flops``: the routed experts' weights and grouped-GEMM FLOPs;
    * ``tokens``: the GEMMs' M (decodes + prompt tokens in the step); ``expert_tokens``: the
      tokens one touched expert receives on average (M x k / experts touched);
    * ``comm_us``: the collectives inside the device group; ``fixed_us``: per-step overheads."""

    fixed_us: float
    bytes: float
    flops: float
    comm_us: float = 0.0
    expert_bytes: float = 0.0
    weight_bytes: float = 0.0
    gemm_flops: float = 0.0
    expert_flops: float = 0.0
    tokens: float = 0.0
    expert_tokens: float = 0.0


def gemm_us(flops: float, tokens: float, flops_per_us: float, half_tokens: float) -> float:
    """A GEMM of M = ``tokens`` rows at ``flops_per_us`` x M / (M + ``half_tokens``): skinny GEMMs
    (decode's few tokens) cannot fill the tensor cores, large ones approach the rate."""
    if flops <= 0.0:
        return 0.0
    return flops / flops_per_us * ((tokens + half_tokens) / tokens if tokens > 0 else 1.0)


def roofline_us(t: Terms, bytes_per_us: float, expert_bytes_per_us: float, flops_per_us: float,
                half_tokens: float = 0.0, attention_flops_per_us: float | None = None) -> float:
    """Microseconds of the work ``t``: the sum of its operations, each at the roofline of its own
    shape (the slower of its bytes over the bandwidth and its FLOPs over the compute rate):

    * dense weight GEMMs: ``max(weight_bytes / bw, gemm_us(gemm_flops, tokens))``;
    * attention and state: ``max((bytes - weight_bytes) / bw, (flops - gemm_flops) / attention rate)``,
      the attention rate ``attention_flops_per_us`` (default the GEMMs' rate): the 16-bit tensor cores
      whatever the weights' precision (the runtimes' attention kernels run 16-bit math on the KV,
      an 8-bit KV dequantised);
    * routed experts (grouped GEMM over the experts touched):
      ``max(expert_bytes / expert_bw, gemm_us(expert_flops, expert_tokens))``;

    plus the fixed costs and the collectives (no overlap between operations assumed)."""
    dense = max(t.weight_bytes / bytes_per_us, gemm_us(t.gemm_flops, t.tokens, flops_per_us, half_tokens))
    other = max((t.bytes - t.weight_bytes) / bytes_per_us,
                (t.flops - t.gemm_flops) / (attention_flops_per_us or flops_per_us))
    experts = max(t.expert_bytes / expert_bytes_per_us,
                  gemm_us(t.expert_flops, t.expert_tokens, flops_per_us, half_tokens))
    return t.fixed_us + dense + other + experts + t.comm_us


COLLECTIVES = ("all_reduce", "all_to_all")


def collective_time_us(kind: str, group_size: int, bytes_per_rank: float, latency_us: float,
                       bandwidth_bytes_per_s: float | None) -> float:
    """Microseconds one collective takes inside a group of ``group_size`` devices.

    ``bytes_per_rank`` is what each rank contributes (all-reduce: its whole buffer; all-to-all:
    everything it sends, spread evenly over the others); ``latency_us`` is one link's latency and
    ``bandwidth_bytes_per_s`` one direction of one rank's link (None: latency only).

    * ``all_reduce`` (ring, reduce-scatter then all-gather): ``2 (g - 1)`` steps, each one link
      latency plus ``bytes / g`` over the link: ``2 (g-1) (latency + bytes / (g bw))``;
    * ``all_to_all`` (pairwise exchange): ``g - 1`` steps of ``bytes / g`` each:
      ``(g-1) (latency + bytes / (g bw))``.

    A group of one costs nothing. Device groups (tensor and expert parallel stages) fill a
    segment's :attr:`Segment.collectives` with these terms.
    """
    if kind not in COLLECTIVES:
        raise ValueError(f"unknown collective {kind!r} (choose from {', '.join(COLLECTIVES)})")
    if group_size < 1:
        raise ValueError("group_size must be at least 1")
    if bytes_per_rank < 0 or latency_us < 0:
        raise ValueError("bytes and latency must not be negative")
    g = group_size
    if g == 1:
        return 0.0
    per_step = latency_us + (bytes_per_rank / g / (bandwidth_bytes_per_s / 1e6) if bandwidth_bytes_per_s else 0.0)
    return (2 * (g - 1) if kind == "all_reduce" else g - 1) * per_step


@dataclass(frozen=True)
class Collective:
    """One collective a segment runs per decode step per layer group: ``count`` times per step,
    each moving ``bytes_per_token`` per request of the batch (e.g. TP: two all-reduces of the hidden
    state per layer; EP: dispatch and combine all-to-alls of the routed tokens)."""

    kind: str
    group_size: int
    bytes_per_token: float
    count: int = 1
    latency_us: float = 0.0
    bandwidth_bytes_per_s: float | None = None
    fixed_us: float | None = None      # one collective's fixed time (perf collective_latency_us)

    def time_us(self, b: int) -> float:
        """All ``count`` collectives of a step with ``b`` requests (one token each): with
        ``fixed_us`` each costs that plus its bandwidth term (the runtime's one-shot and two-shot
        kernels pay one launch and one synchronisation, not one per ring step), otherwise the ring
        of :func:`collective_time_us` with the link latency at every step."""
        if self.fixed_us is None:
            return self.count * collective_time_us(self.kind, self.group_size, b * self.bytes_per_token,
                                                   self.latency_us, self.bandwidth_bytes_per_s)
        wire = collective_time_us(self.kind, self.group_size, b * self.bytes_per_token, 0.0,
                                  self.bandwidth_bytes_per_s)
        return self.count * ((self.fixed_us if self.group_size > 1 else 0.0) + wire)


def tensor_parallel(group_size: int, hidden_bytes_per_token: float, layers: int, latency_us: float,
                    bandwidth_bytes_per_s: float | None) -> Collective:
    """Megatron-style tensor parallelism over ``group_size`` devices: two all-reduces of the hidden
    state per layer (after attention and after the MLP), each ``hidden_bytes_per_token`` per token."""
    return Collective("all_reduce", group_size, hidden_bytes_per_token, count=2 * layers, latency_us=latency_us,
                      bandwidth_bytes_per_s=bandwidth_bytes_per_s)


def expert_parallel(group_size: int, hidden_bytes_per_token: float, experts_per_token: int, moe_layers: int,
                    latency_us: float, bandwidth_bytes_per_s: float | None) -> Collective:
    """Expert parallelism over ``group_size`` devices: per MoE layer a dispatch and a combine
    all-to-all, each moving a token once per routed expert (``experts_per_token``) at the width
    the experts receive, ``hidden_bytes_per_token`` (the hidden state; a latent MoE's latent)."""
    return Collective("all_to_all", group_size, hidden_bytes_per_token * experts_per_token, count=2 * moe_layers,
                      latency_us=latency_us, bandwidth_bytes_per_s=bandwidth_bytes_per_s)


def attention_data_parallel(group_size: int, hidden_bytes_per_token: float, experts_per_token: int,
                            moe_layers: int, latency_us: float, bandwidth_bytes_per_s: float | None) -> Collective:
    """Attention data parallelism with expert parallelism over ``group_size`` devices
    (:mod:`placer.problem.reductions.attention_dp`): every rank runs attention for its own requests on replicated
    weights (no all-reduce), then per MoE layer sends each of its tokens to the ranks of its
    ``experts_per_token`` experts (dispatch) and gathers the results back (combine), each an
    all-to-all of ``hidden_bytes_per_token x experts_per_token`` per token of the rank's own
    batch. The segment's batch is the rank's share of the requests (the instance is one rank's),
    so the time is per rank, and every rank of the group runs the same step at once."""
    return expert_parallel(group_size, hidden_bytes_per_token, experts_per_token, moe_layers, latency_us,
                           bandwidth_bytes_per_s)


@dataclass(frozen=True)
class Segment:
    """Consecutive nodes on one device, with the device's effective rates (bytes/us, FLOP/us)."""

    index: int
    device: int                    # index into instance.devices
    device_id: str
    stage: int                     # index of the device among the used ones (first-visit order)
    nodes: tuple[int, ...]
    costs: tuple[NodeCost, ...]
    overhead_stage_us: float
    overhead_layer_us: float
    bytes_per_us: float            # memory_bandwidth x bandwidth_efficiency / 1e6 (inf when unknown)
    flops_per_us: float            # compute x compute_efficiency / 1e6 (inf when unknown)
    hop_us: float = 0.0            # latency of the link to the next segment (0 for the last)
    hop_bytes_per_us: float = float("inf")
    out_activation_bytes: int = 0  # per token, crossing that link
    layers: int = 0                # distinct model layers among the nodes (parts of one layer count once)
    collectives: tuple[Collective, ...] = ()   # inside the segment's device group (none for one device)
    overhead_layer_request_us: float = 0.0     # per layer and per request of the batch
    overhead_moe_layer_us: float = 0.0         # per routed-expert layer
    moe_layers: int = 0            # distinct model layers among the nodes that route to experts
    expert_bytes_per_us: float = float("inf")  # memory_bandwidth x expert_bandwidth_efficiency / 1e6
    half_tokens: float = 0.0       # perf compute_half_saturation_tokens (see gemm_us)
    attention_flops_per_us: float | None = None   # 16-bit peak x compute_efficiency / 1e6 (None: flops_per_us)

    def terms(self, contexts: Sequence[int]) -> Terms:
        """Bytes and FLOPs of one decode step for requests whose KV lengths are ``contexts``."""
        return self.terms_for(len(contexts), cached_tokens(contexts, self.windows()))

    def windows(self) -> set:
        return set(self._kv)

    @cached_property
    def _kv(self) -> dict:
        """window -> (KV bytes per token, attention FLOPs per cached token) summed over the nodes."""
        out: dict = {}
        for c in self.costs:
            if c.kv_bytes_per_token or c.kv_elements_per_token:
                b, e = out.get(c.kv_window, (0, 0))
                out[c.kv_window] = (b + c.kv_bytes_per_token, e + c.kv_elements_per_token * c.attention_flops_per_kv)
        return out

    @cached_property
    def _per_request(self) -> tuple[float, float, float, float]:
        """(state bytes, dense GEMM FLOPs, state FLOPs, routed-expert FLOPs) every token adds
        whatever its context."""
        experts = float(sum(2.0 * c.experts_per_token * c.expert_params for c in self.costs))
        return (float(sum(2 * c.state_bytes for c in self.costs)),
                float(sum(2.0 * c.active_params for c in self.costs)) - experts,
                float(sum(4.0 * c.state_elements for c in self.costs)), experts)

    def expert_tokens(self, m: float) -> float:
        """Tokens one touched expert receives on average in a step of ``m`` tokens (M x k / touched)."""
        best = 0.0
        for c in self.costs:
            if c.num_experts and c.experts_per_token and m > 0:
                e, k = c.num_experts, c.experts_per_token
                best = max(best, m * k / (e * (1.0 - (1.0 - k / e) ** m)))
        return best

    @cached_property
    def _weights_read(self) -> dict:
        return {}

    def weight_bytes_read(self, b: int) -> float:
        """All weight bytes a micro-batch of ``b`` reads here (dense and routed experts)."""
        return sum(self._weights(b))

    def _weights(self, b: int) -> tuple[float, float]:
        """(dense weight bytes, routed-expert bytes) a micro-batch of ``b`` reads."""
        w = self._weights_read.get(b)
        if w is None:
            experts = float(sum(c.expert_bytes_read(b) for c in self.costs))
            w = self._weights_read[b] = (float(sum(c.weight_bytes_read(b) for c in self.costs)) - experts, experts)
        return w

    def terms_for(self, b: int, cached: dict) -> Terms:
        """:meth:`terms` from the micro-batch size and ``cached[window]`` = sum over its requests of
        min(KV length, window) (``window`` None: the whole length), as :func:`cached_tokens` gives."""
        per_bytes, gemm, state, expert = self._per_request
        dense, experts = self._weights(b)
        nbytes = dense + b * per_bytes
        flops = b * (gemm + state)
        for w, (kb, ke) in self._kv.items():
            nbytes += kb * cached[w]
            flops += ke * cached[w]
        return Terms(self.fixed_us(b), nbytes, flops, sum(c.time_us(b) for c in self.collectives), experts,
                     weight_bytes=dense, gemm_flops=b * gemm, expert_flops=b * expert, tokens=float(b),
                     expert_tokens=self.expert_tokens(b))

    def fixed_us(self, b: int) -> float:
        """The step's fixed costs for a micro-batch of ``b``: per stage, per layer (growing with
        the batch) and per routed-expert layer."""
        return (self.overhead_stage_us + (self.overhead_layer_us + self.overhead_layer_request_us * max(b, 0))
                * self.layers + self.overhead_moe_layer_us * self.moe_layers)

    def time_us(self, contexts: Sequence[int]) -> float:
        """Step time of a micro-batch whose requests hold ``contexts`` tokens of KV each."""
        return self.duration_us(self.terms(contexts))

    def duration_us(self, t: Terms) -> float:
        """Microseconds the work ``t`` takes on this segment's device (:func:`roofline_us`)."""
        return roofline_us(t, self.bytes_per_us, self.expert_bytes_per_us, self.flops_per_us, self.half_tokens,
                           self.attention_flops_per_us)

    def hop_time_us(self, b: int) -> float:
        """The hop after this segment for a micro-batch of ``b``: latency + serialisation."""
        if self.hop_us == 0.0 and self.out_activation_bytes == 0:
            return 0.0
        return self.hop_us + b * self.out_activation_bytes / self.hop_bytes_per_us


def cached_tokens(contexts: Sequence[int], windows) -> dict:
    """``{window: sum of min(c, window) over contexts}`` (``None``: plain sum) for each window."""
    total = float(sum(contexts))
    return {w: total if w is None else float(sum(min(c, w) for c in contexts)) for w in windows}


def compute_flops(device_type, low_precision: bool, weight_bits: int = 16) -> float | None:
    """Peak FLOP/s a step's weight GEMMs run at: the device's dense 8-bit peak (``compute_fp8``)
    when the weights are 8 bits or fewer and the spec gives one (runtimes run FP8 / FP4 weights on
    the 8-bit or narrower tensor cores), times the perf ``compute_fp4_speedup`` for weights of 4
    bits or fewer (a device with 4-bit tensor cores: B200's dense FP4 peak is twice its FP8 one, and
    block-scaled NVFP4 GEMMs reach part of that; the calibration fits the multiple, 1 elsewhere)."""
    if low_precision and device_type.compute_fp8_flops:
        fp4 = device_type.compute_fp4_speedup if weight_bits <= 4 else 1.0
        return device_type.compute_fp8_flops * fp4
    return device_type.compute_flops


def _rate(peak: float | None, efficiency: float) -> float:
    return float("inf") if not peak else peak * efficiency / 1e6


def segments_of(instance: Instance, assignment: Sequence[int]) -> list[Segment]:
    """The route of ``assignment`` as segments with their costs and the hop after each."""
    n = instance.n_nodes
    if len(assignment) != n:
        raise ValueError(f"assignment has {len(assignment)} entries for {n} nodes")
    costs = [node_cost(instance, i) for i in range(n)]
    runs: list[list[int]] = []
    for i in range(n):
        if runs and assignment[runs[-1][-1]] == assignment[i]:
            runs[-1].append(i)
        else:
            runs.append([i])
    stage_of: dict[int, int] = {}
    for run in runs:
        stage_of.setdefault(assignment[run[0]], len(stage_of))
    low_precision = instance.workload.weight_bits <= 8
    bits = instance.workload.weight_bits
    out = []
    for k, run in enumerate(runs):
        d = assignment[run[0]]
        dev = instance.devices[d]
        t = dev.type
        if (t.memory_bandwidth is None and compute_flops(t, low_precision, bits) is None
                and not t.fixed_overhead_us_per_layer and not t.fixed_overhead_us_per_stage):
            # every stage would take no time at all: a speed of infinity is no answer
            field = ("device" if "device" in instance.fleet.spec else f"device_types.{t.name}") + ".memory_bandwidth"
            raise InvalidSpec(instance.fleet.source or instance.fleet.name, field,
                              "the simulator needs the device's memory bandwidth (or its compute, or a fixed "
                              "overhead) to cost a stage; the spec gives none")
        hop, hop_bw, act = 0.0, float("inf"), 0
        if k + 1 < len(runs):
            e = assignment[runs[k + 1][0]]
            hop = instance.hop_us(d, e)
            other = instance.devices[e].id
            bw = instance.fleet.link_bandwidth(dev.id, other)
            hop_bw = bw / 1e6 if bw else float("inf")
            act = costs[run[-1]].activation_bytes_per_token
        out.append(Segment(index=k, device=d, device_id=dev.id, stage=stage_of[d], nodes=tuple(run),
                           costs=tuple(costs[i] for i in run), overhead_stage_us=t.fixed_overhead_us_per_stage,
                           overhead_layer_us=t.fixed_overhead_us_per_layer,
                           bytes_per_us=_rate(t.memory_bandwidth, t.bandwidth_efficiency),
                           flops_per_us=_rate(compute_flops(t, low_precision, bits), t.compute_efficiency),
                           attention_flops_per_us=_rate(t.compute_flops or compute_flops(t, low_precision, bits),
                                                        t.compute_efficiency),
                           hop_us=hop, hop_bytes_per_us=hop_bw, out_activation_bytes=act,
                           layers=len({instance.nodes[i].parent or instance.nodes[i].name for i in run}),
                           collectives=group_collectives(instance, d, run),
                           overhead_layer_request_us=t.fixed_overhead_us_per_layer_per_request,
                           overhead_moe_layer_us=t.fixed_overhead_us_per_moe_layer,
                           moe_layers=len({instance.nodes[i].parent or instance.nodes[i].name for i in run
                                           if costs[i].num_experts}),
                           expert_bytes_per_us=_rate(t.memory_bandwidth,
                                                     t.expert_bandwidth_efficiency or t.bandwidth_efficiency),
                           half_tokens=t.compute_half_saturation_tokens))
    return out


def group_collectives(instance: Instance, device: int, nodes: Sequence[int]) -> tuple[Collective, ...]:
    """The collectives ``nodes`` run inside device ``device``'s group (none for a group of one).

    Tensor parallel (vLLM's layers): an all-reduce of the hidden state after each row-parallel
    projection, two per layer (attention output, MLP down; one for the vocabulary-parallel
    embedding); with expert parallelism an MoE layer replaces its FFN all-reduce by a dispatch and
    a combine all-to-all of the routed tokens, at the experts' width (a latent MoE's latent). The
    counts are :func:`placer.problem.reductions.tensor_parallel.collectives_of`, the ones the solver's hop-latency level uses.
    Latency and bandwidth are the node's link between the group's first two members, the bandwidth
    at the perf's ``collective_bandwidth_efficiency`` (the bus bandwidth NCCL's and the runtimes'
    all-reduce kernels reach); a device type whose perf gives ``collective_latency_us`` pays that
    per collective instead of the link latency per ring step. Under attention data parallelism only the MoE layers' dispatch and
    combine remain (:func:`attention_data_parallel`).
    """
    from placer.problem.reductions.tensor_parallel import collectives_of

    members = instance.members(device)
    g = len(members)
    if g == 1:
        return ()
    base = instance.layout.base_fleet if instance.layout is not None and instance.layout.base_fleet else None
    fleet = base or instance.fleet
    a, b = members[0], members[1]
    latency = float(fleet.link_latency_us(a, b) or 0.0)
    bandwidth = fleet.link_bandwidth(a, b)
    dtype = instance.devices[device].type
    if bandwidth:       # the share of the link a collective's bytes reach (NCCL's bus bandwidth)
        bandwidth *= dtype.collective_bandwidth_efficiency
    fixed = dtype.collective_latency_us
    wl = instance.workload
    hidden = memory.bits_to_bytes(instance.model.hidden_size, wl.activation_bits)
    layers = [instance.nodes[i] for i in nodes]
    dp = instance.attention_dp
    counts = [collectives_of(x, instance.ep, dp) for x in layers]
    reduces = sum(r for r, _ in counts)
    out = []
    # a token goes to the experts at the width they run at: the hidden state, or a latent MoE's
    # latent (its down projection runs before the dispatch, its up projection after the combine);
    # one collective per (width, experts per token) of the layers here
    routed: dict[tuple[int, int], int] = {}
    for x, (_, to_all) in zip(layers, counts):
        if to_all:
            d = dict(x.ffn_dims)
            key = (d.get("latent_size") or instance.model.hidden_size, d["experts_per_token"])
            routed[key] = routed.get(key, 0) + 1
    for (width, k), n in sorted(routed.items()):
        pattern = attention_data_parallel if dp else expert_parallel
        c = pattern(g, memory.bits_to_bytes(width, wl.activation_bits), k, n, latency, bandwidth)
        out.append(Collective(c.kind, c.group_size, c.bytes_per_token, c.count, c.latency_us,
                              c.bandwidth_bytes_per_s, fixed))
    if reduces:
        out.insert(0, Collective("all_reduce", g, hidden, count=reduces, latency_us=latency,
                                 bandwidth_bytes_per_s=bandwidth, fixed_us=fixed))
    return tuple(out)
