"""Every committed export, fed to the runtimes' own code (reference/runtimes.md section 9).

* vLLM 0.33.0 and SGLang 0.5.23: their own ``get_pp_indices`` (vendored verbatim from the wheels
  in tests/vendored/, see the note at the top of each file) with the exported partition variable
  set, every rank: it must own exactly its stage's decoder layers.
* megatron-core (the installed release, 0.16.1 from pip here): the layout parser and
  ``TransformerConfig``'s own validation for every GPT-model export; the 0.16 hybrid pattern
  parser (``allocate_layers``) and ``MambaStack``'s stage split for hybrid exports; the 0.19
  hybrid-pattern parser and ``select_pipeline_segment`` (vendored from Megatron-LM core_v0.19.0)
  for exports targeting 0.17 and later.
"""

from __future__ import annotations

import ast
import json
import shlex
import sys
from types import SimpleNamespace

import pytest
from dirs import SOLUTIONS, VENDORED
from mapping_toys import spec_mapping, toy_hybrid_spec

from placer.export import ExportOptions, ExportRefused, export_mapping
from placer.mapping import read_mapping

sys.path.insert(0, str(VENDORED))

import sglang_0_5_23_pp  # noqa: E402
import vllm_0_33_0_pp  # noqa: E402

CONTIGUOUS = sorted(SOLUTIONS.glob("*__contiguous.json"))
needs_files = pytest.mark.skipif(not CONTIGUOUS, reason="solutions/ is empty: run `python tools/regenerate_solutions.py`")
BARE = ExportOptions(bare=True, force=True)


def stage_layers(doc: dict) -> list[list[int]]:
    """Decoder indices per stage, read from the mapping itself (``layers.N`` names)."""
    return [[int(n.split(".")[1]) for n in st["layers"] if n.startswith("layers.")] for st in doc["stages"]]


def flags(text: str) -> list[str]:
    return shlex.split("\n".join(x for x in text.splitlines() if not x.startswith("#")).replace("\\\n", " "))


# ----------------------------------------------------------------------------- vLLM / SGLang
@needs_files
@pytest.mark.parametrize("path", CONTIGUOUS, ids=[p.stem for p in CONTIGUOUS])
@pytest.mark.parametrize("runtime, module, variable", [
    ("vllm", vllm_0_33_0_pp, "VLLM_PP_LAYER_PARTITION"),
    ("sglang", sglang_0_5_23_pp, "SGLANG_PP_LAYER_PARTITION"),
])
def test_runtime_get_pp_indices_gives_each_rank_its_stage(path, runtime, module, variable, monkeypatch):
    doc = read_mapping(path)
    want = stage_layers(doc)
    # solved under the runtimes' rules (tools/regenerate_solutions.py): every rank builds a decoder layer
    assert all(want), [k for k, x in enumerate(want) if not x]
    num_layers = sum(len(x) for x in want)
    monkeypatch.setenv(variable, export_mapping(doc, runtime, options=BARE).text)
    pp = len(want)
    for rank in range(pp):
        start, end = module.get_pp_indices(num_layers, rank, pp)
        assert list(range(start, end)) == want[rank], (runtime, rank)


def test_vendored_get_pp_indices_refuse_a_wrong_partition(monkeypatch):
    for module, variable in ((vllm_0_33_0_pp, "VLLM_PP_LAYER_PARTITION"),
                             (sglang_0_5_23_pp, "SGLANG_PP_LAYER_PARTITION")):
        monkeypatch.setenv(variable, "20,20,21")
        with pytest.raises(ValueError, match=r"sum\(partitions\)=61 does not match num_hidden_layers=62"):
            module.get_pp_indices(62, 0, 3)
    # the defaults differ (runtimes.md 2.2 / 3): why placer always sets the variable
    monkeypatch.delenv("VLLM_PP_LAYER_PARTITION")
    monkeypatch.delenv("SGLANG_PP_LAYER_PARTITION")
    assert [vllm_0_33_0_pp.get_pp_indices(62, r, 3) for r in range(3)] == [(0, 21), (21, 42), (42, 62)]
    assert [sglang_0_5_23_pp.get_pp_indices(62, r, 3) for r in range(3)] == [(0, 20), (20, 41), (41, 62)]


@needs_files
@pytest.mark.parametrize("path", CONTIGUOUS, ids=[p.stem for p in CONTIGUOUS])
def test_committed_mapping_holds_what_vllms_default_split_of_its_ranks_holds(path, monkeypatch):
    """Guaranteed concurrency is a solver level: on the same ranks (devices, in order), vLLM's own
    default split (its ``get_pp_indices`` without the variable; the embedding on the first rank,
    the head on the last) never holds more live requests, by placer's memory numbers, than the
    committed plan. qwen3-next-80b: 19 either way (7 7 7 7 7 7 6 layers); 18 before the level."""
    from placer.mapping import instance_from_mapping

    doc = read_mapping(path)
    _, _, _, inst = instance_from_mapping(doc)
    monkeypatch.delenv("VLLM_PP_LAYER_PARTITION", raising=False)
    pp, layers = len(doc["stages"]), inst.model.num_hidden_layers
    ceilings = []
    for rank, stage in enumerate(doc["stages"]):
        start, end = vllm_0_33_0_pp.get_pp_indices(layers, rank, pp)
        nodes = [i for i, x in enumerate(inst.nodes) if x.index is not None and start <= x.index < end
                 or (x.kind == "embedding" and rank == 0) or (x.kind == "lm_head" and rank == pp - 1)]
        ceilings.append(inst.max_concurrency(nodes, inst.device_index[stage["device"]]))
    finite = [c for c in ceilings if c is not None]
    default = min(finite) if finite else None
    assert default is None or doc["summary"]["concurrency_ceiling"] >= default, (ceilings, default)
    if doc["model"]["name"] == "qwen3-next-80b":
        assert (default, doc["summary"]["concurrency_ceiling"]) == (19, 19)


# ----------------------------------------------------------------------------- Megatron (installed)
def _config_kwargs(words: list[str]) -> tuple[dict, bool]:
    """TransformerConfig fields for the exported flags; an unknown flag fails the test."""
    fields = {"--num-layers": ("num_layers", int), "--pipeline-model-parallel-size": ("pipeline_model_parallel_size", int),
              "--pipeline-model-parallel-layout": ("pipeline_model_parallel_layout", str),
              "--hidden-size": ("hidden_size", int), "--num-experts": ("num_moe_experts", int),
              "--moe-layer-freq": ("moe_layer_freq", ast.literal_eval),
              "--experimental-attention-variant": ("experimental_attention_variant", str),
              "--linear-attention-freq": ("linear_attention_freq", ast.literal_eval),
              "--window-size": ("window_size", lambda s: tuple(int(x) for x in s.split(","))),
              "--window-attn-skip-freq": ("window_attn_skip_freq", ast.literal_eval),
              "--decoder-first-pipeline-num-layers": ("num_layers_in_first_pipeline_stage", int),
              "--decoder-last-pipeline-num-layers": ("num_layers_in_last_pipeline_stage", int)}
    kwargs, mla, k = {}, False, 0
    while k < len(words):
        w = words[k]
        if w == "--multi-latent-attention":
            mla, k = True, k + 1
        elif w == "--seq-length":          # a training argument, not a TransformerConfig field
            k += 2
        elif w in ("--hybrid-override-pattern", "--hybrid-layer-pattern"):
            k += 2
        else:
            assert w in fields, f"flag {w} has no known Megatron destination"
            name, parse = fields[w]
            kwargs[name] = parse(words[k + 1])
            k += 2
    return kwargs, mla


def _megatron_config(kwargs: dict, mla: bool):
    torch = pytest.importorskip("torch")
    from megatron.core.transformer.transformer_config import MLATransformerConfig, TransformerConfig

    cls = MLATransformerConfig if mla else TransformerConfig
    base = dict(hidden_size=64, num_attention_heads=4, pipeline_dtype=torch.float32)
    return cls(**{**base, **kwargs})


@pytest.mark.runtimes
@needs_files
@pytest.mark.parametrize("path", CONTIGUOUS, ids=[p.stem for p in CONTIGUOUS])
def test_megatron_core_parses_and_validates_every_gpt_export(path):
    pytest.importorskip("megatron.core", reason="megatron-core is the runtimes extra (pip install -e '.[runtimes]')")
    from megatron.core.transformer.enums import LayerType
    from megatron.core.transformer.pipeline_parallel_layer_layout import PipelineParallelLayerLayout

    doc = read_mapping(path)
    try:
        text = export_mapping(doc, "megatron").text
    except ExportRefused as exc:
        assert "has no" in exc.message          # a layer kind Megatron cannot build, named
        return
    want = stage_layers(doc)
    words = flags(text)
    assert "--hybrid-layer-pattern" not in words and "--hybrid-override-pattern" not in words
    layout_text = words[words.index("--pipeline-model-parallel-layout") + 1]
    pp = len(want)
    layout = PipelineParallelLayerLayout(layout_text, pp)
    layout.validate_layer_layout(num_layers=sum(map(len, want)), mtp_num_layers=None)
    assert [layout.get_layer_id_list(LayerType.decoder, vp_stage=0, pp_rank=r) for r in range(pp)] == want
    kwargs, mla = _config_kwargs(words)
    config = _megatron_config(kwargs, mla)       # TransformerConfig.__post_init__: Megatron's own checks
    assert config.pipeline_model_parallel_layout.get_num_layers_to_build(LayerType.decoder, 0, pp - 1) \
        == len(want[-1])


TOY_MAMBA2 = toy_hybrid_spec("toy-mamba2", 3, "{type: mamba2, d_inner: 32, d_state: 4, num_heads: 2}")


class _Group:
    def __init__(self, rank, size):
        self._rank, self._size = rank, size

    def rank(self):
        return self._rank

    def size(self):
        return self._size


@pytest.mark.runtimes
@pytest.mark.parametrize("assignment, stages", [
    ([0, 0, 0, 0, 1, 1, 1, 1], [[0, 1, 2], [3, 4, 5]]),           # even: 6 + 6 symbols
    ([0, 0, 0, 1, 1, 1, 1, 1], [[0, 1], [2, 3, 4, 5]]),           # first stage 4 symbols, last 8
    ([0, 0, 1, 1, 2, 2, 2, 2], [[0], [1, 2], [3, 4, 5]]),         # first 2, last 6 after a middle of 4
])
def test_megatron_0_16_builds_each_rank_of_a_hybrid_export(tmp_path, assignment, stages):
    pytest.importorskip("megatron.core", reason="megatron-core is the runtimes extra (pip install -e '.[runtimes]')")
    from megatron.core.ssm.mamba_block import MambaStack
    from megatron.core.ssm.mamba_hybrid_layer_allocation import allocate_layers

    doc = spec_mapping(tmp_path, TOY_MAMBA2, assignment)
    words = flags(export_mapping(doc, "megatron", options=ExportOptions(runtime_version="0.16.1")).text)
    pattern = words[words.index("--hybrid-override-pattern") + 1]
    num_layers = int(words[words.index("--num-layers") + 1])
    types = allocate_layers(num_layers, 0.0, 0.0, pattern)         # 0.16.1's own parser
    kwargs, _ = _config_kwargs(words)
    pp = len(stages)
    config = SimpleNamespace(virtual_pipeline_model_parallel_size=None, num_layers=num_layers,
                             num_layers_in_first_pipeline_stage=kwargs.get("num_layers_in_first_pipeline_stage"),
                             num_layers_in_last_pipeline_stage=kwargs.get("num_layers_in_last_pipeline_stage"))
    # placer's stage r owns decoder layers stages[r]: two symbols (mixer, FFN) per layer
    for r in range(pp):
        fake = SimpleNamespace(config=config, pp_group=_Group(r, pp))
        offset, selected = MambaStack._select_layers_for_pipeline_parallel(fake, types)
        assert (offset, len(selected)) == (2 * stages[r][0], 2 * len(stages[r]))
    # the first/last flags also pass TransformerConfig's uneven-pipeline checks
    _megatron_config({k: v for k, v in kwargs.items() if k != "pipeline_model_parallel_layout"}, False)


@pytest.mark.runtimes
def test_megatron_0_16_refuses_the_later_pipe_separator(tmp_path):
    pytest.importorskip("megatron.core", reason="megatron-core is the runtimes extra (pip install -e '.[runtimes]')")
    from megatron.core.ssm.mamba_hybrid_layer_allocation import allocate_layers

    doc = spec_mapping(tmp_path, TOY_MAMBA2, [0, 0, 0, 0, 1, 1, 1, 1])
    later = export_mapping(doc, "megatron", options=ExportOptions(runtime_version="0.17.0", bare=True)).text
    assert later == "ME*-ME|*-ME*-"
    with pytest.raises(ValueError, match=r"'\|' is not one of"):
        allocate_layers(len(later), 0.0, 0.0, later)
    earlier = export_mapping(doc, "megatron", options=ExportOptions(runtime_version="0.16.1", bare=True)).text
    assert allocate_layers(len(earlier), 0.0, 0.0, earlier) == list(earlier)


# ----------------------------------------------------------------------------- Megatron 0.19 (vendored)
@pytest.mark.runtimes
@pytest.mark.parametrize("version", ["0.17.0", "0.19.0", "main"])
def test_megatron_0_19_selects_each_rank_of_every_hybrid_export(version):
    pytest.importorskip("torch", reason="the vendored Megatron module imports torch (the runtimes extra)")
    import megatron_hybrid_0_19_0 as hybrid

    checked = set()
    for path in CONTIGUOUS:
        doc = read_mapping(path)
        try:
            text = export_mapping(doc, "megatron", options=ExportOptions(runtime_version=version, force=True)).text
        except ExportRefused as exc:
            assert "has no" in exc.message
            continue
        words = flags(text)
        if "--hybrid-layer-pattern" not in words:
            continue
        assert "--pipeline-model-parallel-layout" not in words      # "should not be used with"
        pattern = words[words.index("--hybrid-layer-pattern") + 1]
        want = stage_layers(doc)
        pp = len(want)
        parsed = hybrid.parse_hybrid_pattern(pattern)
        assert parsed.main_pattern == pattern and parsed.mtp_num_depths == 0
        assert hybrid.get_hybrid_total_pipeline_segment_count(pattern) == pp
        mixers = set(hybrid.Symbols.VALID_LAYERS) - {hybrid.Symbols.MLP, hybrid.Symbols.MOE}
        real = hybrid.torch
        try:
            for r in range(pp):
                hybrid.torch = SimpleNamespace(distributed=SimpleNamespace(get_rank=lambda g: g.rank(),
                                                                           get_world_size=lambda g: g.size()))
                layers, offset = hybrid.select_pipeline_segment(pattern, _Group(r, pp), None)
                assert sum(ch in mixers for ch in layers) == len(want[r])
                assert offset == sum(len(s) for s in pattern.split("|")[:r])
        finally:
            hybrid.torch = real
        checked.add(doc["model"]["name"])
    if CONTIGUOUS:       # Gated DeltaNet (G) and Mamba (M, Jamba's Mamba-1 with --force) hybrids
        assert checked == {"qwen3-next-80b", "jamba-1.5-large"}


@pytest.mark.runtimes
def test_vendored_0_19_parser_refuses_mixing_attention_and_mla():
    pytest.importorskip("torch", reason="the vendored Megatron module imports torch (the runtimes extra)")
    import megatron_hybrid_0_19_0 as hybrid

    with pytest.raises(ValueError, match="both Attention and MLA"):
        hybrid.parse_hybrid_pattern("M*+|M-")
    assert json.dumps(sorted(hybrid.Symbols.VALID_LAYERS)) == json.dumps(sorted("MG*D+-E"))
