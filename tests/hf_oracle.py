"""transformers' own parameter count of a Hugging Face ``config.json``: the oracle for the HF corpus.

The config is loaded with the configuration class transformers registers for its ``model_type``
(``CONFIG_MAPPING[model_type].from_dict``). A type transformers does not register is resolved through
``architectures[0]`` when transformers has that causal-LM class (Kimi K2 says ``model_type: kimi_k2``
but ``DeepseekV3ForCausalLM``), and a wrapper it does not register is unwrapped to its ``text_config``
(``language_config`` / ``llm_config``). The causal language model of the text config is then built
with ``AutoModelForCausalLM.from_config`` inside ``torch.device("meta")``: no weights are allocated,
nothing is downloaded (``HF_HUB_OFFLINE=1``), no remote code runs. For a multimodal wrapper whose class
transformers has (``architectures[0]``), the whole wrapper is built as well, for the vision / audio
tower's count.

Counting rules:
- parameters are counted once each (``Module.parameters()`` skips shared tensors), so a tied
  embedding and LM head count once; quantization is ignored (these are logical parameters);
- ``total`` is the causal LM (embedding, decoder layers, final norm, LM head); ``decoder_layers`` is
  the per-layer count of the first ``num_hidden_layers`` entries of the decoder's layer list
  (run-length encoded as ``[count, repeat]`` pairs); ``extra_layers`` counts layer-list entries past
  ``num_hidden_layers`` (none in the current corpus); ``embedding`` / ``lm_head`` are the input and
  output embedding matrices (``lm_head`` 0 when tied) and ``rest`` whatever remains (final norm,
  parameters of no layer); ``persistent_buffers`` counts the state-dict buffers (stored in a
  checkpoint but not parameters, such as DeepSeek's router ``e_score_correction_bias``), which
  ``total`` leaves out;
- ``full_total`` is the wrapper's count including its non-text towers, when built.

A family the installed transformers does not have is recorded as ``{"status": "unavailable",
"reason": ...}``; the test checks those against a hand count instead.

Run ``python -m tests.hf_oracle --write`` to regenerate ``tests/fixtures/hf_corpus/meta_counts.json``
(``--check`` compares without writing; file arguments restrict the run).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

CORPUS = Path(__file__).parent / "fixtures" / "hf_corpus"
COUNTS_FILE = CORPUS / "meta_counts.json"
WRAPPER_KEYS = ("text_config", "language_config", "llm_config")
# corpus configs of families placer's interpreter does not list: it reads them from transformers' module
# tree on the meta device, which needs the hf extra (tests/specs/test_hf_corpus.py checks this list)
META_ONLY = {"Qwen--Qwen3-VL-30B-A3B-Instruct", "Qwen--Qwen3-VL-32B-Instruct", "XiaomiMiMo--MiMo-V2-Flash",
             "deepseek-ai--DeepSeek-V4-Flash", "deepseek-ai--DeepSeek-V4-Pro", "google--gemma-4-26B-A4B",
             "nvidia--Gemma-4-31B-IT-NVFP4"}


class Unavailable(Exception):
    """transformers cannot build this config (the message says why)."""


def corpus_configs() -> list[Path]:
    return sorted(p for p in CORPUS.glob("*.json")
                  if p.name != COUNTS_FILE.name and not p.name.endswith(".hf_quant_config.json"))


def versions() -> dict:
    import torch
    import transformers
    return {"transformers": transformers.__version__, "torch": torch.__version__.split("+")[0]}


def _config(data: dict, where: str = ""):
    """(transformers config, how it was resolved) for a config mapping, unwrapping unknown wrappers."""
    from transformers import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    model_type = data.get("model_type")
    if model_type in CONFIG_MAPPING:
        return CONFIG_MAPPING[model_type].from_dict(data), f"{where}model_type {model_type}"
    archs = data.get("architectures") or []
    # several model types may share a class (DeepseekV3ForCausalLM); prefer the one the class is named after
    candidates = [mt for mt, cls in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items()
                  if archs and cls == archs[0] and mt in CONFIG_MAPPING]
    if candidates:
        named = [mt for mt in candidates if archs[0].lower().startswith(mt.replace("_", "").replace("-", ""))]
        mt = (named or candidates)[0]
        return CONFIG_MAPPING[mt].from_dict(data), f"{where}architectures[0] {archs[0]} (model_type {mt})"
    for key in WRAPPER_KEYS:
        if isinstance(data.get(key), dict):
            return _config(data[key], f"{where}{key}: ")
    import transformers
    raise Unavailable(f"transformers {transformers.__version__} has no model type {model_type!r}"
                      + (f" nor class {archs[0]!r}" if archs else ""))


def _numel(module) -> int:
    return sum(p.numel() for p in module.parameters())


def _layer_list(model, n: int):
    """The decoder's layer list: the longest ModuleList named ``...layers`` with at least n entries."""
    import torch.nn as nn
    found = [(name, m) for name, m in model.named_modules()
             if isinstance(m, nn.ModuleList) and name.split(".")[-1] == "layers" and len(m) >= n]
    if not found:
        raise Unavailable(f"no decoder layer list of {n} entries in {type(model).__name__}")
    return min(found, key=lambda x: (x[0].count("."), -len(x[1])))


def _persistent_buffers(model) -> int:
    """Elements of state-dict tensors that are buffers, not parameters (e.g. DeepSeek's router
    ``e_score_correction_bias``): stored in checkpoints, but not in ``total``."""
    params = {name for name, _ in model.named_parameters(remove_duplicate=False)}
    return sum(t.numel() for name, t in model.state_dict().items() if name not in params)


def _runs(values: list[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for v in values:
        if out and out[-1][0] == v:
            out[-1][1] += 1
        else:
            out.append([v, 1])
    return out


def meta_count(data: dict) -> dict:
    """transformers' meta-device count of one config mapping (see the module docstring)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    started = time.perf_counter()
    config, resolved = _config(data)
    text = config.get_text_config()
    n = text.num_hidden_layers
    archs = data.get("architectures") or []
    wrapper_class = (getattr(transformers, archs[0], None) if config is not text and archs else None)
    full = None
    try:
        with torch.device("meta"):
            if wrapper_class is not None:
                full = wrapper_class._from_config(config)
            try:
                model = AutoModelForCausalLM.from_config(text)
                decoder = model
            except ValueError:  # no causal-LM class for this text config: the wrapper's text model
                if full is None:
                    raise
                model, decoder = full, full.get_decoder()
    except Exception as exc:  # transformers itself cannot build this config
        raise Unavailable(f"transformers {transformers.__version__} cannot build it: "
                          f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
    _, layers = _layer_list(decoder, n)
    per_layer = [_numel(x) for x in layers]
    embed = model.get_input_embeddings()
    head = model.get_output_embeddings()
    tied = head is not None and head.weight is embed.weight
    embedding = embed.weight.numel()
    lm_head = 0 if head is None or tied else head.weight.numel()
    total = _numel(model) if decoder is model else _numel(decoder) + lm_head
    out = {
        "status": "built",
        "resolved_by": resolved,
        "model_class": type(model).__name__ + ("" if decoder is model else f" ({type(decoder).__name__} + lm_head)"),
        "total": total,
        "embedding": embedding,
        "lm_head": lm_head,
        "tied_embeddings": tied,
        "num_hidden_layers": n,
        "decoder_layers": _runs(per_layer[:n]),
        "extra_layers": sum(per_layer[n:]),
        "rest": total - sum(per_layer) - embedding - lm_head,
        "persistent_buffers": _persistent_buffers(model if decoder is model else decoder),
    }
    if full is not None:
        out["full_class"] = type(full).__name__
        out["full_total"] = _numel(full)
    del model, decoder, full
    out["seconds"] = round(time.perf_counter() - started, 2)
    return out


def count_file(path: Path) -> dict:
    data = json.loads(Path(path).read_text())
    try:
        return meta_count(data)
    except Unavailable as exc:
        return {"status": "unavailable", "reason": str(exc)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.hf_oracle", description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="*", type=Path, help="configs to count (default: the whole corpus)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help=f"write {COUNTS_FILE.name}")
    mode.add_argument("--check", action="store_true", help=f"compare with {COUNTS_FILE.name}")
    args = parser.parse_args(argv)
    files = args.files or corpus_configs()
    recorded = json.loads(COUNTS_FILE.read_text()) if COUNTS_FILE.exists() else {"models": {}}
    results, bad = {}, 0
    for path in files:
        r = count_file(path)
        results[path.stem] = r
        old = recorded["models"].get(path.stem)
        same = old is not None and {k: v for k, v in old.items() if k != "seconds"} == \
            {k: v for k, v in r.items() if k != "seconds"}
        bad += args.check and not same
        shown = f"{r['total']:>17,} in {r['seconds']:5.1f} s" if r["status"] == "built" else r["reason"]
        print(f"{path.stem:55s} {shown}{'' if same or not args.check else '  DIFFERS'}", flush=True)
    if args.write:
        models = {**recorded["models"], **results} if args.files else results
        doc = {"generated_by": "python -m tests.hf_oracle --write", **versions(),
               "models": dict(sorted(models.items()))}
        tmp = COUNTS_FILE.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=1) + "\n")
        tmp.replace(COUNTS_FILE)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
