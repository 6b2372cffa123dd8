"""The speculative-decoding flags of a launch command, for a mapping that states its speculation.

A mapping made with ``--spec-tokens K`` records ``speculative`` (:class:`placer.specs.speculative.Speculation`):
the method, the draft tokens per step and the draft model. The flags are the runtimes' own, as
their parsers define them (checked against the parsers' tables in tests/vendored/):

* **vLLM** 0.33.0: ``--speculative-config`` is JSON (``optional_type(json.loads)`` in
  ``vllm/engine/arg_utils.py``) of :class:`SpeculativeConfig` fields (``vllm/config/speculative.py``):
  ``method`` one of ``SpeculativeMethod`` (``mtp`` for every model's own MTP layers: the
  per-model names such as ``deepseek_mtp`` are deprecated and replaced with ``mtp``; ``eagle3``;
  ``draft_model``), ``model`` the draft checkpoint (none for MTP: the target's own layers) and
  ``num_speculative_tokens``.
* **SGLang** 0.5.23: ``--speculative-algorithm`` (``EAGLE`` for MTP layers, which SGLang runs on
  its EAGLE path; ``EAGLE3``; ``STANDALONE`` for a draft model), ``--speculative-num-steps`` (draft
  passes, k), ``--speculative-eagle-topk 1`` (a chain of drafts, as placer's plan assumes) and
  ``--speculative-num-draft-tokens`` (k + 1: the verified positions of a chain), plus
  ``--speculative-draft-model-path`` for a draft model and for MTP models whose draft SGLang does
  not take from the target checkpoint itself (``arg_groups/speculative_hook.py``).

TensorRT-LLM has MTP options of its own (``speculative_config`` with ``decoding_type: MTP`` in
its LLM API YAML); placer does not export to TensorRT-LLM.
"""

from __future__ import annotations

import json

from placer.export.stages import ExportOptions
from placer.specs.model import LayerGraph
from placer.specs.speculative import Speculation

__all__ = ["vllm_speculative", "sglang_speculative", "SGLANG_MTP_FROM_TARGET"]

# architectures whose MTP draft SGLang 0.5.23 loads from the target checkpoint when no draft
# path is given (sglang/srt/arg_groups/speculative_hook.py, _handle_eagle_family)
SGLANG_MTP_FROM_TARGET = frozenset({
    "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV4ForCausalLM", "Glm4MoeForCausalLM",
    "Glm4MoeLiteForCausalLM", "GlmMoeDsaForCausalLM", "BailingMoeForCausalLM", "BailingMoeV2ForCausalLM",
    "BailingMoeV2_5ForCausalLM", "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration",
    "HYV3ForCausalLM", "HYV4ForCausalLM", "Qwen4ExpForConditionalGeneration"})

_VLLM_METHOD = {"mtp": "mtp", "eagle3": "eagle3", "draft_model": "draft_model"}
_SGLANG_ALGORITHM = {"mtp": "EAGLE", "eagle3": "EAGLE3", "draft_model": "STANDALONE"}


def _draft(spec: Speculation, options: ExportOptions) -> str | None:
    if spec.method == "mtp":
        return None
    return options.served_draft_model or spec.draft_name


def _comment(spec: Speculation, runtime: str, options: ExportOptions) -> list[str]:
    accept = spec.accept
    what = "its own MTP layers" if spec.method == "mtp" else f"{spec.method} draft {spec.draft_name}"
    lines = [f"# speculative decoding: {spec.tokens} draft token(s) per step with {what}, placed with the LM head "
             f"on the last rank ({runtime} builds the drafter there); acceptance length "
             + (f"{accept:g} ({spec.accept_source or 'given'})" if accept is not None else "not stated")]
    if spec.method != "mtp" and not options.served_draft_model:
        lines.append(f"# {spec.draft_name} is the draft's spec name: put its checkpoint's id or path in its "
                     "place (placer export --served-draft-model ID writes it)")
    return lines


def vllm_speculative(spec: Speculation | None, graph: LayerGraph,
                     options: ExportOptions) -> tuple[list[str], list[str]]:
    """(argv, comment lines) of vLLM's speculative decoding for the mapping's ``spec``; ([], []) for none."""
    if spec is None:
        return [], []
    config: dict = {"method": _VLLM_METHOD[spec.method]}
    draft = _draft(spec, options)
    if draft is not None:
        config["model"] = draft
    config["num_speculative_tokens"] = spec.tokens
    return ["--speculative-config", json.dumps(config, separators=(", ", ": "))], _comment(spec, "vLLM", options)


def sglang_speculative(spec: Speculation | None, graph: LayerGraph, options: ExportOptions,
                       served: str) -> tuple[list[str], list[str]]:
    """(argv, comment lines) of SGLang's speculative decoding for the mapping's ``spec`` (``served``:
    the target checkpoint the command loads); ([], []) for none."""
    if spec is None:
        return [], []
    k = spec.tokens
    argv = ["--speculative-algorithm", _SGLANG_ALGORITHM[spec.method]]
    draft = _draft(spec, options)
    if draft is None and graph.architecture not in SGLANG_MTP_FROM_TARGET:
        draft = served           # the MTP layers are in the target's own checkpoint
    if draft is not None:
        argv += ["--speculative-draft-model-path", draft]
    argv += ["--speculative-num-steps", str(k), "--speculative-eagle-topk", "1",
             "--speculative-num-draft-tokens", str(k + 1)]
    return argv, _comment(spec, "SGLang", options)
