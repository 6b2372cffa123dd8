"""What each runtime accepts of a plan, as requirement kinds placer solves under.

A plan solved for a runtime should be one that runtime runs as written, so its rules become
constraints of the model (:data:`placer.problem.instance.REQUIREMENTS`, honoured and proven by every exact
method, checked by the exact re-check and the validator) and restrictions of the request (mode,
degrees). The rules are the runtimes' own, as their code applies them and the exporters
(:mod:`placer.export`) re-run them:

* **vLLM** (``vllm/distributed/utils.py::get_pp_indices`` with ``VLLM_PP_LAYER_PARTITION``) and
  **SGLang** (``python/sglang/srt/distributed/utils.py::get_pp_indices``, the same parser):
  contiguous ranges of decoder layers in rank order, at least one layer on every rank (a rank of
  only the embedding or only the LM head builds no layer; the exporter never emits a zero count),
  the embedding on the first rank and the head on the last, one ``--tensor-parallel-size`` /
  ``--tp-size`` and one expert-parallel setting for every rank (per-stage tensor parallelism is an
  open request, vllm-project/vllm#27239). vLLM on a hybrid model (full and linear attention) skips
  hybrid block-size alignment on a rank without a full-attention layer and fails at startup
  unless ``--block-size`` is given (vllm-project/vllm#51752); the export gives it, so such a rank
  runs, and ``attention-per-stage`` is the rule's optional part (:attr:`RuntimeRules.optional`):
  a plan that needs no ``--block-size`` (a hybrid needing more stages than it has full-attention
  layers, kimi-k3-hf on 70 wafers with 24, has none).
* **Speculative decoding** (vLLM, SGLang): the drafter (the model's MTP layers, an EAGLE head,
  a draft model) is built on the last pipeline rank only (vLLM 0.33.0
  ``vllm/v1/worker/gpu_model_runner.py``: ``if self.speculative_config and
  get_pp_group().is_last_rank``; SGLang 0.5.23 ``speculative/eagle_worker_v2.py``:
  ``_hosts_draft = get_parallel().pp_group.is_last_rank``): ``mtp-with-head`` for a model with
  such nodes. Megatron-LM's layout allows MTP layers off the last rank ("MTP standalone",
  ``pipeline_parallel_layer_layout.py::validate_layer_layout``), so it has no such rule.
* **Megatron-LM** (``--pipeline-model-parallel-layout``, ``megatron/core/transformer/
  pipeline_parallel_layer_layout.py``; hybrid models through the layer pattern of
  ``megatron/core/ssm/mamba_hybrid_layer_allocation.py``): the layout ``E t*c0 | ... | t*cN L``
  puts the embedding on the first stage and the loss on the last and accepts a stage without
  decoder layers; the hybrid pattern cannot express an empty stage, so a model with
  linear-attention layers needs a decoder layer on every stage (stricter than Megatron 0.16's GPT
  layout path for Gated DeltaNet models needs); one ``--tensor-model-parallel-size`` and one
  ``--expert-model-parallel-size``.
* **torch.distributed.pipelining** (``pipeline(split_spec=...)``, one process per stage): split
  points by module name, the embedding on the first stage and the head on the last, whole layers,
  no tensor parallelism inside a stage (degree 1).

Every runtime runs contiguous stages only (a free placement revisits devices; a split placement
cuts layers).
"""

from __future__ import annotations

from dataclasses import dataclass

from placer.specs.errors import ARGUMENT, InvalidSpec
from placer.specs.model import LayerGraph, is_draft_node

__all__ = ["RUNTIMES", "RuntimeRules", "runtime_rules", "runtime_requirements", "runtime_modes",
           "check_runtime_request", "is_hybrid"]

RUNTIMES = ("vllm", "sglang", "megatron", "torch")
_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "megatron": "Megatron-LM", "torch": "torch.distributed.pipelining"}


@dataclass(frozen=True)
class RuntimeRules:
    """A runtime's rules for a plan: ``requirements`` (kinds of :data:`placer.problem.instance.REQUIREMENTS`),
    the ``modes`` it runs, the tensor-parallel ``degrees`` it runs (None: any), whether stages may
    differ in degree (``per_stage_degrees``), ``optional`` kinds that spare a workaround the export
    applies (a user may add them with ``--require``), and ``notes`` saying where each rule comes from."""

    runtime: str
    requirements: tuple[str, ...]
    modes: tuple[str, ...] = ("contiguous",)
    degrees: tuple[int, ...] | None = None
    per_stage_degrees: bool = False
    optional: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The runtime's own name (``vLLM``)."""
        return _NAMES[self.runtime]


def is_hybrid(model: LayerGraph) -> bool:
    """True when the model mixes full-attention and linear-attention (or Mamba) decoder layers."""
    kinds = {x.kind for x in model.layers if x.index is not None}
    return "linear_attention" in kinds and "attention" in kinds


def _check_runtime(runtime: str) -> str:
    if runtime not in RUNTIMES:
        raise InvalidSpec(ARGUMENT, "runtime", f"unknown runtime {runtime!r} (one of {', '.join(RUNTIMES)})")
    return runtime


def runtime_rules(runtime: str, model: LayerGraph | None = None) -> RuntimeRules:
    """The rules of ``runtime`` (one of :data:`RUNTIMES`) for ``model`` (see the module docstring).

    The rules that depend on the model (Megatron's decoder layer on every stage of a hybrid
    pattern; vLLM's optional full attention on every rank of a hybrid) are included only when
    ``model`` is given and is such a model; without ``model`` the rules every model shares.
    :class:`InvalidSpec` (field ``runtime``) for an unknown runtime.
    """
    _check_runtime(runtime)
    order = "embedding-first-head-last"
    hybrid = model is not None and is_hybrid(model)
    linear = model is not None and any(x.kind == "linear_attention" for x in model.layers if x.index is not None)
    drafts = model is not None and any(is_draft_node(x) for x in model.layers)
    if runtime in ("vllm", "sglang"):
        kinds = ["decoder-per-stage", order, "uniform-degree"]
        notes = ["every rank builds a decoder layer (the partition has no zero count)",
                 "the embedding on the first rank, the LM head on the last",
                 "one tensor- and expert-parallel degree for every rank"]
        optional: tuple[str, ...] = ()
        if drafts:
            kinds.append("mtp-with-head")
            notes.append("the drafter (MTP layers, an EAGLE head, a draft model) on the last rank only "
                         "(vLLM gpu_model_runner: speculative_config and is_last_rank; SGLang eagle_worker_v2: "
                         "_hosts_draft = is_last_rank)")
        if runtime == "vllm" and hybrid:
            optional = ("attention-per-stage",)
            notes.append("a rank of a hybrid model without a full-attention layer needs --block-size, which the "
                         "export sets (vllm-project/vllm#51752); attention-per-stage asks for a plan without one")
        return RuntimeRules(runtime, tuple(kinds), optional=optional, notes=tuple(notes))
    if runtime == "megatron":
        kinds = [order, "uniform-degree"]
        notes = ["the layout's E on the first stage, L on the last", "one --tensor-model-parallel-size and "
                 "--expert-model-parallel-size"]
        if linear:
            kinds.insert(0, "decoder-per-stage")
            notes.append("the hybrid layer pattern cannot express a stage without a decoder layer")

        return RuntimeRules(runtime, tuple(kinds), notes=tuple(notes))
    return RuntimeRules(runtime, (order, "uniform-degree"), degrees=(1,),
                        notes=("the embedding on the first stage, the LM head on the last",
                               "one process per stage with whole layers: no tensor parallelism inside a stage"))


def runtime_requirements(runtime: str, model: LayerGraph | None = None) -> tuple[str, ...]:
    """The requirement kinds ``runtime``'s rules put on a plan of ``model`` (:func:`runtime_rules`)."""
    return runtime_rules(runtime, model).requirements


def runtime_modes(runtime: str) -> tuple[str, ...]:
    """The placement modes ``runtime`` runs (contiguous stages, for every runtime)."""
    return runtime_rules(runtime).modes


def check_runtime_request(runtime: str, *, mode: str | None = None, degrees=None, per_stage: bool = False,
                          model: LayerGraph | None = None) -> RuntimeRules:
    """The rules of ``runtime``, after refusing what it cannot run: a ``mode`` other than its own
    (field ``mode``), tensor-parallel ``degrees`` outside its own (field ``tp``; ``degrees`` None:
    any the solve tries, which are then restricted by the caller to ``rules.degrees``), per-stage
    degrees (field ``per_stage_tp``). Raises :class:`InvalidSpec`; returns the rules."""
    rules = runtime_rules(runtime, model)
    if mode is not None and mode not in rules.modes:
        raise InvalidSpec(ARGUMENT, "mode", f"{rules.name} runs {' or '.join(rules.modes)} stages, not {mode} "
                                            f"(use --mode {rules.modes[0]})")
    if degrees is not None and rules.degrees is not None:
        bad = sorted(set(degrees) - set(rules.degrees))
        if bad:
            raise InvalidSpec(ARGUMENT, "tp", f"{rules.name} runs tensor-parallel degree "
                                              f"{', '.join(map(str, rules.degrees))} only, not {', '.join(map(str, bad))}")
    if per_stage and not rules.per_stage_degrees:
        raise InvalidSpec(ARGUMENT, "per_stage_tp", f"{rules.name} takes one tensor-parallel degree for every "
                                                    "stage; solve without per-stage degrees")
    return rules
