"""Which model families each runtime release runs, and where that was read.

A model is looked up by its architecture class (``architecture:`` in the spec, ``architectures[0]``
of a Hugging Face ``config.json``). An export for a runtime that cannot run the model is refused
with the reason (:class:`~placer.export.stages.ExportRefused`, exit 2) unless ``--force``; an
architecture the table does not list is exported with a one-line note that support was not
checked. Entries record what the runtime's own code says, with the file it says it in:

* vLLM 0.33.0 wheel, ``vllm/model_executor/models/registry.py``: the architectures it registers
  (``_TEXT_GENERATION_MODELS`` and friends) and ``_PREVIOUSLY_SUPPORTED_MODELS`` (an architecture
  removed after the release named there; the loader raises "was supported in vLLM until v...").
* SGLang 0.5.23 wheel, ``python/sglang/srt/models/*.py``: the ``EntryClass`` of each model file.
* torch.distributed.pipelining runs a transformers model: the installed transformers' classes.
* Megatron-LM: which layer kinds it can build is decided per layer by :mod:`.megatron`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Support", "RUNTIME_VERSIONS", "runtime_support", "version_tuple", "SUPPORT_SOURCES"]

# the releases whose own code the table was read from (and the default export target)
RUNTIME_VERSIONS = {"vllm": "0.33.0", "sglang": "0.5.23", "megatron": "0.16.1", "torch": "2.13.0"}

SUPPORT_SOURCES = {
    "vllm": "vllm 0.33.0 wheel: vllm/model_executor/models/registry.py",
    "sglang": "sglang 0.5.23 wheel: sglang/srt/models/*.py (EntryClass)",
}

# Architectures placer's catalog and config.json importer know, as each runtime release has them.
_VLLM_0_33_RUNS = frozenset({
    "DeepseekV3ForCausalLM", "GptOssForCausalLM", "JambaForCausalLM", "KimiLinearForCausalLM",
    "KimiK3ForConditionalGeneration", "LlamaForCausalLM", "Qwen3MoeForCausalLM", "Qwen3NextForCausalLM",
    "Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM", "MiniMaxM2ForCausalLM",
})
# _PREVIOUSLY_SUPPORTED_MODELS in vLLM 0.33.0: the last release that still ran the architecture
_VLLM_LAST_SUPPORTED = {"MiniMaxText01ForCausalLM": "0.23.0", "MiniMaxForCausalLM": "0.23.0",
                        "MiniMaxM1ForCausalLM": "0.23.0"}
# a known failure under pipeline parallelism in the release (refused for pp > 1 unless --force)
_VLLM_PP_BUGS = {
    "Qwen3_5ForCausalLM": "Qwen3.5 hybrids under pipeline parallelism hit a per-rank KeyError "
                          "(vllm-project/vllm#36640)",
    "Qwen3_5MoeForCausalLM": "Qwen3.5 hybrids under pipeline parallelism hit a per-rank KeyError "
                             "(vllm-project/vllm#36640)",
}
_SGLANG_0_5_23_RUNS = frozenset({
    "DeepseekV3ForCausalLM", "GptOssForCausalLM", "KimiLinearForCausalLM", "KimiK3LinearForCausalLM",
    "LlamaForCausalLM", "Qwen3MoeForCausalLM", "Qwen3NextForCausalLM", "Qwen3_5ForCausalLM",
    "Qwen3_5MoeForCausalLM", "MiniMaxM2ForCausalLM",
})
# architectures placer knows that SGLang 0.5.23 has no model class for
_SGLANG_0_5_23_LACKS = frozenset({"JambaForCausalLM", "MiniMaxText01ForCausalLM", "MiniMaxForCausalLM"})


@dataclass(frozen=True)
class Support:
    """``runs``: True (the release runs it), False (it does not: ``reason``), None (not in the table)."""

    runs: bool | None
    reason: str = ""


def version_tuple(text: str) -> tuple[int, ...]:
    """``"0.33.0"`` -> ``(0, 33, 0)``; ``ValueError`` for anything else."""
    parts = text.strip().split(".")
    if not parts or not all(p.isdigit() for p in parts):
        raise ValueError(f"expected a release number such as 0.33.0, got {text!r}")
    return tuple(int(p) for p in parts)


def runtime_support(runtime: str, version: str, architecture: str | None, pp_size: int) -> Support:
    """What the table says about ``architecture`` on ``runtime`` ``version`` with ``pp_size`` ranks."""
    if not architecture:
        return Support(None, "the model spec names no architecture")
    if runtime == "vllm":
        last = _VLLM_LAST_SUPPORTED.get(architecture)
        if last is not None and version_tuple(version) > version_tuple(last):
            return Support(False, f"vLLM {version} does not run {architecture}: it was supported until "
                                  f"v{last} ({SUPPORT_SOURCES['vllm']}, _PREVIOUSLY_SUPPORTED_MODELS)")
        if version == RUNTIME_VERSIONS["vllm"]:
            if architecture in _VLLM_PP_BUGS and pp_size > 1:
                return Support(False, f"vLLM {version}: {_VLLM_PP_BUGS[architecture]}")
            if architecture in _VLLM_0_33_RUNS:
                return Support(True)
        return Support(None, f"{architecture} on vLLM {version} is not in placer's support table")
    if runtime == "sglang":
        if version == RUNTIME_VERSIONS["sglang"]:
            if architecture in _SGLANG_0_5_23_LACKS:
                return Support(False, f"SGLang {version} has no {architecture} model class "
                                      f"({SUPPORT_SOURCES['sglang']})")
            if architecture in _SGLANG_0_5_23_RUNS:
                return Support(True)
        return Support(None, f"{architecture} on SGLang {version} is not in placer's support table")
    return Support(None, "")
