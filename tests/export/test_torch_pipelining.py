"""The exported torch script, run with ``torch.distributed.pipelining`` on tiny transformers models.

For every family placer imports (tests/tiny_hf.py: width 32, 4 layers, seeded random weights), the
config.json goes through placer's importer, a 3-stage mapping is exported as a script, and the
script's own wrapper and split points are used: in one process ``pipeline()`` must trace the real
model, each stage must hold exactly its mapped layers, and the pipelined logits must equal the
unsplit model's (allclose 1e-5); in 3 processes over gloo the script itself (``torchrun``)
must produce the same logits.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from mapping_toys import spec_mapping
from tiny_hf import FAMILIES, build, write_config

from placer.export import ExportOptions, export_mapping

torch = pytest.importorskip("torch", reason="torch is the runtimes extra (pip install torch==2.13.0 -e '.[runtimes]')")
pytest.importorskip("transformers", reason="transformers is the runtimes extra (pip install -e '.[runtimes]')")
pytestmark = pytest.mark.runtimes

STAGES = [[0], [1, 2], [3]]          # decoder layers per stage: embedding + L0 | L1 L2 | L3 + head


def exported_script(tmp_path, family: str, stages: list[list[int]]) -> tuple[str, object]:
    folder = write_config(tmp_path / family, family)
    doc = spec_mapping(tmp_path, folder / "config.json", stages=stages, memory=10**12, context=64)
    text = export_mapping(doc, "torch", options=ExportOptions(served_model=str(folder))).text
    return text, folder


def load_script(text: str) -> dict:
    namespace: dict = {"__name__": "placer_export"}
    exec(compile(text, "pipeline.py", "exec"), namespace)
    return namespace


@pytest.mark.parametrize("family", list(FAMILIES))
def test_one_process_pipeline_equals_the_unsplit_model(tmp_path, family):
    from torch.distributed.pipelining import pipeline

    text, folder = exported_script(tmp_path, family, STAGES)
    ns = load_script(text)
    assert ns["NUM_STAGES"] == 3
    hf = build(folder)
    wrapped = ns["LogitsOnly"](hf)
    ids = torch.randint(0, hf.config.vocab_size, (2, 6), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = hf(input_ids=ids, use_cache=False).logits
    pipe = pipeline(wrapped, mb_args=(ids,), split_spec=ns["SPLIT_SPEC"])
    assert pipe.num_stages == 3
    for k, layers in enumerate(STAGES):
        names = {n for n, _ in pipe.get_stage_module(k).named_modules()}
        held = sorted(i for i in range(4) if f"inner.model.layers.{i}" in names)
        assert held == layers, (family, k)
    assert ("inner.model.embed_tokens" in {n for n, _ in pipe.get_stage_module(0).named_modules()})
    assert ("inner.lm_head" in {n for n, _ in pipe.get_stage_module(2).named_modules()})
    with torch.no_grad():
        got = pipe(ids)
    got = got[0] if isinstance(got, tuple | list) else got
    assert got.shape == want.shape
    assert torch.allclose(got, want, atol=1e-5, rtol=0), float((got - want).abs().max())


# one run (each process traces the model: about a minute on two cores); a hybrid MoE model, 3 processes
@pytest.mark.parametrize("family, stages", [("minimax", STAGES)])
def test_multi_process_script_over_gloo_equals_the_unsplit_model(tmp_path, family, stages):
    text, folder = exported_script(tmp_path, family, stages)
    hf = build(folder)
    hf.save_pretrained(folder)
    script = tmp_path / "pipeline.py"
    script.write_text(text, encoding="utf-8")
    out = tmp_path / "logits.pt"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                          f"--nproc-per-node={len(stages)}", str(script), "--batch", "4", "--microbatches", "2",
                          "--seq", "6", "--save-logits", str(out)],
                         capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    got = torch.load(out)
    ids = torch.randint(0, hf.config.vocab_size, (4, 6), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want = hf(input_ids=ids, use_cache=False).logits
    assert "next tokens:" in run.stdout
    assert torch.allclose(got, want, atol=1e-5, rtol=0), float((got - want).abs().max())
