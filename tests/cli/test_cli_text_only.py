"""``--text-only`` on every command that loads a model; it drops every tower (a compact spec's
``vision_tower`` and a vision layer listed among explicit layers, as a meta-device import writes
it); at tp > 1 a tower is whole on every rank (a data-parallel encoder) and the exports say so."""

from __future__ import annotations

import json
import sys

import pytest
from dirs import FIXTURES, VENDORED

from placer.problem.parallel import model_refusal
from placer.specs.hf import spec_file
from placer.specs.model import model_from_dict

QWEN = FIXTURES / "hf_corpus" / "Qwen--Qwen3.5-27B.json"      # a vision tower in front of 64 decoder layers

# a meta-device import's form (placer/specs/hf/meta.py): the tower is the first explicit layer
META_SPEC = {"name": "meta-vl", "architecture": "StepVLForCausalLM", "hidden_size": 1024, "layers": [
    {"kind": "vision", "name": "vision_tower", "params": 400_000_000},
    {"kind": "embedding", "name": "embedding", "params": 1024 * 32000},
    *({"kind": "attention", "name": f"layers.{i}", "params": 50_000_000, "kv_elements_per_token": 2048}
      for i in range(4)),
    {"kind": "lm_head", "name": "lm_head", "params": 1024 * 32000}]}


@pytest.mark.parametrize("command", ["solve", "compare", "inspect", "plan", "sweep", "frontier", "import-hf",
                                     "simulate"])
def test_every_command_that_loads_a_model_takes_text_only(command, run_cli):
    code, out, err = run_cli([command, "--help"])
    assert code == 0, err
    assert "--text-only" in out


def test_text_only_drops_a_tower_listed_among_the_layers():
    full = model_from_dict(META_SPEC)
    assert full.layers[0].name == "vision_tower" and not full.dropped
    text = model_from_dict(META_SPEC, text_only=True)
    assert [x.kind for x in text.layers][:2] == ["embedding", "attention"]
    assert text.total_params == full.total_params - 400_000_000
    assert text.dropped == ("vision_tower",)
    assert "vision/audio tower (400,000,000 parameters) dropped (--text-only)" in text.notes


def test_a_tower_is_whole_on_every_rank_at_tp():
    from placer.mapping import ranks
    from placer.problem.parallel import params_per_rank

    full = model_from_dict(META_SPEC)
    tower = full.layers[0]
    assert not model_refusal(full, 8) or not model_refusal(full, 8).startswith("vision_tower")
    assert params_per_rank(tower, 1024, 8) == ranks.rank_params(tower, 1024, 8) == 400_000_000
    assert ranks.rank_refusal(tower, 1024, 8) is None


def test_solve_at_tp_keeps_the_tower_and_the_exports_replicate_it(run_cli, tmp_path):
    out = tmp_path / "q.json"
    code, _, err = run_cli(["solve", QWEN, "-H", "h100", "--racks", "1", "--tp", "2", "--context", "32k",
                            "--concurrency", "8", "--method", "dp", "-q", "-o", str(out)])
    assert code == 0, err
    assert "vision_tower" in json.dumps(json.loads(out.read_text())["stages"])
    code, _, err = run_cli(["validate", str(out)])
    assert code == 0, err
    code, text, err = run_cli(["export", str(out), "--format", "vllm"])
    assert code == 0 and "--tensor-parallel-size 2 --mm-encoder-tp-mode data" in text, err
    code, text, err = run_cli(["export", str(out), "--format", "sglang"])
    assert code == 0 and "--tp-size 2 --mm-enable-dp-encoder" in text, err
    # both flags as the runtimes define them (their argument tables, tests/vendored)
    sys.path.insert(0, str(VENDORED))
    import sglang_0_5_23_cli
    import vllm_0_33_0_cli

    assert "--mm-encoder-tp-mode" in vllm_0_33_0_cli.ENGINE_FLAGS
    assert sglang_0_5_23_cli.FIELDS["mm_enable_dp_encoder"]["flags"] == ("--mm-enable-dp-encoder",)


def test_plan_takes_text_only(run_cli):
    args = ["plan", QWEN, "-H", "h100", "--racks", "1", "-n", "8", "--context", "32k", "--method", "dp", "-q",
            "--json"]
    code, out, err = run_cli([*args, "--text-only"])
    assert code == 0, err
    assert "vision/audio tower dropped (--text-only)" in err
    code, full, err = run_cli(args)
    assert code == 0, err
    assert "vision/audio tower dropped" not in err
    assert json.loads(out)["total_concurrency"] == json.loads(full)["total_concurrency"] == 8


def test_sweep_takes_text_only(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(["sweep", QWEN, "-H", "h100", "--racks", "1", "--context", "32k", "--concurrency", "8",
                            "--jobs", "1", "--method", "dp", "--text-only", "-q"])
    assert code == 0, err
    assert "vision/audio tower dropped (--text-only)" in err


def test_simulate_text_only_applies_to_compare(run_cli, tmp_path):
    code, _, err = run_cli(["simulate", "no-such-mapping.json", "--text-only"])
    assert code == 2 and "--text-only" in err and "--compare" in err


def test_import_hf_text_only_drops_a_tower_listed_among_the_layers(run_cli, tmp_path, monkeypatch):
    # the meta-device path needs transformers: its spec is given as it writes it
    monkeypatch.setattr(spec_file, "spec_from_hf_file", lambda path: json.loads(json.dumps(META_SPEC)))
    out = tmp_path / "m.yaml"
    code, _, err = run_cli(["import-hf", tmp_path / "config.json", "--text-only", "-o", out])
    assert code == 0, err
    text = out.read_text()
    assert "vision/audio tower (400,000,000 parameters) left out (--text-only)" in text
    assert "kind: vision" not in text and "vision_tower" not in text.split("\nname:", 1)[1]
