"""A newcomer's first hour through the command line: each test is a path a new user took (README and
``--help`` only) that cost time or gave a wrong answer, run end to end with the values checked."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from dirs import FIXTURES as FIXTURES_DIR
from dirs import ROOT, SOLUTIONS

FIXTURES = FIXTURES_DIR / "hf_corpus"


@pytest.fixture
def qwen_config(tmp_path):
    """Qwen3.5-27B's config.json (a vision tower in front of 64 decoder layers), under the name a
    download tool gives it."""
    path = tmp_path / "Qwen--Qwen3.5-27B_config.json"
    shutil.copy(FIXTURES / "Qwen--Qwen3.5-27B.json", path)
    return path


# ----------------------------------------------------------------------------- 1: --text-only plans
def test_text_only_plan_exports_validates_and_rebuilds(run_cli, qwen_config, tmp_path):
    q = tmp_path / "q.json"
    code, _, err = run_cli(["solve", qwen_config, "-H", "h100", "--text-only", "--racks", "1", "--tp", "2",
                            "--context", "32k", "--concurrency", "8", "--method", "dp", "-q", "-o", q])
    assert code == 0, err
    doc = json.loads(q.read_text())
    assert doc["model"]["dropped"] == ["vision_tower"]
    assert "vision_tower" not in doc["route"] and len(doc["route"]) == 66      # embedding, 64 layers, head
    assert doc["parallel"]["tp"] == 2                    # the tower no longer blocks tensor parallelism
    code, out, err = run_cli(["validate", q])
    assert code == 0, out + err
    code, out, err = run_cli(["export", q, "--format", "vllm", "--bare"])
    assert code == 0, err
    counts = [int(c) for c in out.strip().split(",")]
    assert sum(counts) == 64 and len(counts) == len(doc["stages"])
    fixed = tmp_path / "fixed.json"
    code, out, err = run_cli(["validate", q, "--rebuild", "-o", fixed])
    assert code == 0, out + err
    assert json.loads(fixed.read_text())["model"]["dropped"] == ["vision_tower"]


def test_an_mtp_plan_reloads_with_its_mtp_layer(run_cli, qwen_config, tmp_path):
    q = tmp_path / "qm.json"
    code, _, err = run_cli(["solve", qwen_config, "-H", "h100", "--text-only", "--mtp", "--racks", "1", "--tp", "1",
                            "--context", "32k", "--concurrency", "8", "--method", "dp", "-q", "-o", q])
    assert code == 0, err
    doc = json.loads(q.read_text())
    assert doc["model"]["mtp"] is True and len(doc["route"]) == 67 + 1      # the MTP layer is placed too,
    # and, on a pipeline of more than one stage, the drafter's own embedding copy beside it on the
    # last stage (vLLM and SGLang load it there past one rank)
    assert len(doc["stages"]) > 1 and {"mtp.0", "mtp.embed_tokens", "lm_head"} <= set(doc["stages"][-1]["layers"])
    code, out, err = run_cli(["validate", q])
    assert code == 0, out + err


def test_import_hf_text_only_leaves_the_tower_out(run_cli, qwen_config, tmp_path):
    spec = tmp_path / "q.yaml"
    code, _, err = run_cli(["import-hf", qwen_config, "--text-only", "-o", spec])
    assert code == 0, err
    text = spec.read_text()
    assert "vision_tower" not in text.split("\nname:", 1)[1]
    assert re.search(r"vision/audio tower \([\d,]+ parameters\) left out \(--text-only\)", text)
    code, out, _ = run_cli(["inspect", spec, "--json"])
    names = [x["name"] for x in json.loads(out)["layers"]]
    assert names[0] == "embedding" and len(names) == 66


@pytest.mark.hf
def test_import_hf_text_only_says_the_towers_count_from_transformers(run_cli, qwen_config, tmp_path):
    """The count of the tower left out is transformers' own (the meta-device module tree)."""
    spec = tmp_path / "q.yaml"
    code, _, err = run_cli(["import-hf", qwen_config, "--text-only", "-o", spec])
    assert code == 0, err
    assert "vision/audio tower (460,730,096 parameters) left out (--text-only)" in spec.read_text()
    code, out, _ = run_cli(["inspect", qwen_config, "--json"])
    full = json.loads(out)
    assert full["layers"][0]["name"] == "vision_tower"
    # the text spec is the full one less the tower, parameter for parameter
    code, out2, _ = run_cli(["inspect", spec, "--json"])
    assert json.loads(out2)["totals"]["params"] == full["totals"]["params"] - 460_730_096


# ----------------------------------------------------------------------------- 2: speed-floor plans
PLANNED = 8         # live requests the speed-floor tests plan for


@pytest.fixture(scope="module")
def floor_mapping(tmp_path_factory):
    """llama-3.1-70b for 8 users at >= 30 tokens/s on H100s: several replicas, each at fewer live
    requests than its memory holds (more would slow every user below the floor)."""
    from placer import Traffic, load_fleet, load_model
    from placer.mapping import speed_floor_mapping, write_mapping
    from placer.planning import Requirements, SolverSettings, Targets
    from placer.planning.speed import speed_search
    from placer.specs.workload import workload_for

    model = load_model("llama-3.1-70b")
    # whole 32k prompts, 16 tokens out: the shape under which memory holds more than the floor allows
    plan = speed_search(model, load_fleet("h100"), workload_for(model, context="32k", concurrency=PLANNED),
                        Requirements(targets=Targets(min_user_tps=30, output_tokens=16),
                                     traffic=Traffic(prompt_tokens=32768 - 16, output_tokens=16)),
                        SolverSettings(method="cpsat", time_limit=10))
    path = tmp_path_factory.mktemp("floor") / "f.json"
    write_mapping(path, speed_floor_mapping(plan))
    return path, plan


def test_speed_floor_mapping_carries_the_floor_the_load_and_the_replicas(run_cli, floor_mapping):
    path, plan = floor_mapping
    doc = json.loads(path.read_text())
    chosen = plan.chosen
    k, live = chosen.replicas, chosen.load
    # k replicas of what one holds at the floor, the planned requests spread evenly over them
    assert k == -(-PLANNED // chosen.shape.held) >= 2 and live == -(-PLANNED // k)
    assert doc["serving"]["replicas"] == k and doc["serving"]["live_per_replica"] == live
    assert doc["serving"]["min_user_tokens_per_s"] == 30.0 and doc["serving"]["planned_live_requests"] == PLANNED
    assert doc["serving"]["per_user_tokens_per_s"] >= 30.0
    assert doc["workload"]["concurrency"] == live          # the stages are counted for the load they serve
    assert doc["summary"]["concurrency_ceiling"] > live    # memory holds more than the floor allows
    assert all(s["bytes"]["kv_reserve"] > 0 and s["max_concurrency"] >= live for s in doc["stages"])
    code, out, err = run_cli(["validate", path])
    assert code == 0, out + err
    fixed = path.parent / "fixed.json"
    code, out, err = run_cli(["validate", path, "--rebuild", "-o", fixed])
    assert code == 0, out + err
    assert json.loads(fixed.read_text())["serving"] == doc["serving"]


def test_speed_floor_export_serves_the_floors_load_and_names_the_replicas(run_cli, floor_mapping):
    path, plan = floor_mapping
    k, live = plan.chosen.replicas, plan.chosen.load
    code, out, err = run_cli(["export", path, "--format", "vllm"])
    assert code == 0, err
    command = out.strip().splitlines()[-1]
    assert f"--max-num-seqs {live} " in command and f"--tensor-parallel-size {plan.chosen.shape.tp}" in command
    assert f"# {k} replicas serve the {PLANNED} planned live requests: run this command once per replica" in out
    code, out, err = run_cli(["export", path, "--format", "sglang"])
    assert f"--max-running-requests {live} " in out.strip().splitlines()[-1]


def test_simulating_a_speed_floor_mapping_runs_at_its_load_and_meets_the_floor(run_cli, floor_mapping):
    path, plan = floor_mapping
    code, out, err = run_cli(["simulate", path, "--json"])
    assert code == 0, err
    res = json.loads(out)
    assert res["live_requests"] == plan.chosen.load
    assert res["per_user_tokens_per_s"] >= 30.0
    # the same run the plan chose the replica by
    assert res["per_user_tokens_per_s"] == pytest.approx(plan.chosen.sim.per_user_tokens_per_s, rel=1e-6)   # JSON: 8 digits


def test_solve_with_a_speed_floor_writes_the_serving_record(run_cli, tmp_path):
    path = tmp_path / "f.json"
    code, _, err = run_cli(["solve", "llama-3.1-70b", "-H", "h100", "--context", "32k", "--concurrency", PLANNED,
                            "--min-user-tps", "30", "--isl", 32768 - 16, "--osl", 16, "--time-limit", "10", "-o", path])
    assert code == 0, err
    serving = json.loads(path.read_text()).get("serving") or {}
    assert serving.get("replicas", 1) >= 2 and serving.get("min_user_tokens_per_s") == 30.0


# ----------------------------------------------------------------------------- 6: exports
def test_export_serves_the_hub_id_in_the_models_name_not_the_file_stem(run_cli, qwen_config, tmp_path):
    q = tmp_path / "q.json"
    code, _, err = run_cli(["solve", qwen_config, "-H", "h100", "--text-only", "--racks", "1", "--tp", "1",
                            "--context", "32k", "--concurrency", "8", "--method", "dp", "-q", "-o", q])
    assert code == 0, err
    code, out, err = run_cli(["export", q, "--format", "sglang"])
    assert code == 0, err
    assert "--model-path Qwen/Qwen3.5-27B " in out.strip().splitlines()[-1]
    code, out, _ = run_cli(["export", q, "--format", "vllm", "--served-model", "/ckpt/qwen"])
    assert " vllm serve /ckpt/qwen " in out.strip().splitlines()[-1]


def test_export_of_a_checkpoint_config_serves_its_directory(run_cli, tmp_path):
    ckpt = tmp_path / "Meta-Llama-3.1-8B"
    ckpt.mkdir()
    shutil.copy(FIXTURES / "meta-llama--Meta-Llama-3.1-8B.json", ckpt / "config.json")
    m = tmp_path / "m.json"
    code, _, err = run_cli(["solve", ckpt / "config.json", "-H", "h100", "--racks", "1", "--tp", "1",
                            "--context", "8k", "--concurrency", "4", "--time-limit", "10", "-q", "-o", m])
    assert code == 0, err
    code, out, err = run_cli(["export", m, "--format", "vllm"])
    assert code == 0, err
    assert f" vllm serve {ckpt} " in out.strip().splitlines()[-1]


def test_a_wafer_plan_exported_to_a_gpu_runtime_says_so(run_cli):
    path = SOLUTIONS / "llama-3.1-70b__wse-3t__contiguous.json"
    for fmt, runtime in (("vllm", "vLLM"), ("sglang", "SGLang")):
        code, out, err = run_cli(["export", path, "--format", fmt])
        assert code == 0, err
        assert f"# wse-3t is a wafer fleet and {runtime} runs on GPUs" in out


def test_a_multi_node_gpu_plan_gets_the_runtimes_multi_node_launch(run_cli, tmp_path):
    m = tmp_path / "m.json"
    code, _, err = run_cli(["solve", "llama-3.1-405b", "-H", "h100", "--racks", "3", "--tp", "8",
                            "--context", "8k", "--concurrency", "8", "--time-limit", "10", "-q", "-o", m])
    assert code == 0, err
    doc = json.loads(m.read_text())
    racks = sorted({s["rack"] for s in doc["stages"]})
    assert len(racks) == 2 and doc["summary"]["devices_used"] == 16      # 810 GB of weights: 2 nodes of 8
    code, out, err = run_cli(["export", m, "--format", "vllm"])
    assert code == 0, err
    assert out.strip().splitlines()[-1].endswith("--distributed-executor-backend ray")
    assert "ray start --head --port=6379" in out and "ray start --address=HEAD_IP:6379" in out
    code, out, err = run_cli(["export", m, "--format", "sglang"])
    assert code == 0, err
    assert out.strip().splitlines()[-1].endswith("--nnodes 2 --node-rank 0 --dist-init-addr HEAD_IP:5000")
    assert f"on r{racks[1]}: the same command with --node-rank 1" in out


# ----------------------------------------------------------------------------- 3: advice with tensor parallelism
def test_smallest_fleet_advice_counts_tensor_parallelism(run_cli):
    ask = ["llama-3.1-405b", "-H", "h100", "--context", "128k", "--concurrency", "64", "--time-limit", "20"]
    code, out, _ = run_cli(["solve", *ask, "--racks", "1"])
    assert code == 1
    assert "smallest fleet that fits: --racks 10 --tp 8 (80 devices; at tp 1: --racks 16)" in out
    # the advice, taken: 80 GPUs at tp 8, proven; one rack fewer holds it at no degree
    code, out, err = run_cli(["solve", *ask, "--racks", "10", "--tp", "8", "-q"])
    assert code == 0, err
    assert "devices 80 (lower bound 80)" in out and "status optimal (proven)" in out
    code, out, _ = run_cli(["solve", *ask, "--racks", "9", "-q"])
    assert code == 1 and "no placement" in out


# ----------------------------------------------------------------------------- 7: files only where a flag says
def test_frontier_writes_no_file_unasked(run_cli, tmp_path, monkeypatch):
    import yaml
    from frontier_toys import FAST, MODEL

    (tmp_path / "small.yaml").write_text(yaml.safe_dump(MODEL))
    (tmp_path / "fast.yaml").write_text(yaml.safe_dump(FAST))
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    args = ["frontier", tmp_path / "small.yaml", "-H", tmp_path / "fast.yaml", "--context", "1000",
            "--speeds", "2000", "--jobs", 1, "--output-tokens", 8, "--method", "dp", "-q"]
    code, out, err = run_cli(args)
    assert code == 0, err
    assert list(work.iterdir()) == []
    assert out.splitlines()[-1] == "nothing written (-o FILE writes the points, --plot FILE the plot)"
    assert " 1 replicas " not in out
    code, out, err = run_cli([*args, "-o", "points.csv"])
    assert code == 0, err
    assert [p.name for p in work.iterdir()] == ["points.csv"] and out.splitlines()[-1] == "wrote points.csv"


# ----------------------------------------------------------------------------- 8: small things that cost time
def test_a_mistyped_format_names_the_flag(run_cli, tmp_path):
    code, out, err = run_cli(["export", SOLUTION_8B, "--format", "vlm"])
    assert (code, out) == (2, "")
    assert err == "error: --format: format: 'vlm' is not one of 'vllm', 'sglang', 'megatron', 'torch', 'json'.\n"


SOLUTION_8B = SOLUTIONS / "llama-3.1-8b__wse-3t__contiguous.json"


def test_one_of_a_thing_is_singular(run_cli):
    code, out, _ = run_cli(["validate", SOLUTION_8B])
    assert code == 0 and "contiguous, 1 device, 0 hops, concurrency ceiling" in out
    code, out, _ = run_cli(["simulate", SOLUTION_8B, "--requests", "2", "--output-tokens", "2"])
    assert code == 0 and ": 1 stage, 1 device visit per token, 0 hops" in out


def test_plan_legend_only_under_a_starred_row(run_cli):
    code, out, _ = run_cli(["plan", "llama-3.1-8b", "-H", "h100", "--racks", "1", "-n", "100000",
                            "--context", "128k", "-q"])
    assert "no replica count holds 100000 live requests on the 8-device fleet" in out
    assert not any(line.startswith("*") for line in out.splitlines())
    code, out, _ = run_cli(["plan", "llama-3.1-8b", "-H", "h100", "--racks", "1", "-n", "16", "--context", "128k",
                            "-q"])
    starred = [line for line in out.splitlines() if line.startswith("* ")]
    assert len(starred) == 2 and starred[1] == "* fewest devices"      # the best row, then its legend


def test_a_misspelt_mapping_field_is_refused_in_one_line(run_cli, tmp_path):
    doc = json.loads(SOLUTION_8B.read_text())
    doc["stages"][0]["devcie"] = doc["stages"][0]["device"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    for command in (["validate", bad], ["export", bad, "--format", "vllm"], ["simulate", bad]):
        code, out, err = run_cli(command)
        assert (code, out) == (2, "")
        assert err == f"error: {bad}: /stages/0/devcie: unknown field\n"


def _overlapping_labels(ax, which: str) -> list[tuple[str, str]]:
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    axis = ax.xaxis if which == "x" else ax.yaxis
    lo, hi = sorted(ax.get_xlim() if which == "x" else ax.get_ylim())
    labels = []
    for tick in [*axis.get_major_ticks(), *axis.get_minor_ticks()]:
        text = tick.label1
        if text.get_visible() and text.get_text() and lo <= tick.get_loc() <= hi:
            labels.append((text.get_window_extent(renderer), text.get_text()))
    labels.sort(key=lambda b: b[0].x0 if which == "x" else b[0].y0)
    return [(a[1], b[1]) for a, b in zip(labels, labels[1:])
            if (a[0].x1 > b[0].x0 if which == "x" else a[0].y1 > b[0].y0)]


# matplotlib's own labels overlap on 1.2 to 1.5 decades (3x10^4 against 4x10^4) and on narrow spans
# of large values (2.2x10^5 against 2.4x10^5)
@pytest.mark.slow
@pytest.mark.parametrize("span", [(150.0, 150.0 * 10**1.4), (33_000.0, 33_000.0 * 10**1.3),
                                  (120_000.0, 120_000.0 * 10**0.2), (20.0, 90_000.0), (1.0, 3e7)])
def test_frontier_log_axis_labels_do_not_overlap(span, run_cli, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from placer.plotting import plot_speed_frontiers

    lo, hi = span
    # rows as `placer frontier --json` prints them, spread over the span on both axes
    rows = [dict(platform=p, per_user_tokens_per_s=lo * (hi / lo) ** (k / 9), pareto=True,
                 tokens_per_s_per_mw=lo * 3 * (hi / lo) ** (1 - k / 9), tokens_per_s_per_device=lo * (hi / lo) ** (1 - k / 9))
            for p in ("a", "b") for k in range(10)]
    fig = plot_speed_frontiers(rows, speeds=(lo * 2,))
    for ax in fig.axes:
        for which in "xy":
            assert _overlapping_labels(ax, which) == [], (which, span)


def test_quiet_quiets_the_speed_floor(run_cli):
    code, out, err = run_cli(["solve", "llama-3.1-70b", "-H", "h100", "--context", "32k", "--concurrency", PLANNED,
                              "--min-user-tps", "30", "--time-limit", "10", "-q"])
    assert code == 0
    assert err == ""


# ----------------------------------------------------------------------------- 9: which per-user figure
def test_frontier_names_its_per_user_figure_and_gives_the_one_that_adds_up(run_cli, tmp_path):
    import yaml
    from frontier_toys import FAST, MODEL

    (tmp_path / "small.yaml").write_text(yaml.safe_dump(MODEL))
    (tmp_path / "fast.yaml").write_text(yaml.safe_dump(FAST))
    args = ["frontier", tmp_path / "small.yaml", "-H", tmp_path / "fast.yaml", "--context", "1000",
            "--speeds", "2000", "--jobs", 1, "--output-tokens", 8, "--method", "dp", "-q"]
    code, out, err = run_cli([*args, "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["figures"]["per_user_tokens_per_s"].startswith("mean over requests of each request's decode rate")
    multi = [r for r in doc["rows"] if r["devices"] > 1 and r["live_per_replica"] > 1]
    assert multi
    for r in doc["rows"]:
        # aggregate / live multiplies back to the aggregate; the mean request rate is the other, named figure
        assert r["aggregate_per_live_tokens_per_s"] * r["live_per_replica"] == pytest.approx(
            r["aggregate_tokens_per_s"], rel=1e-12)
    code, out, err = run_cli(args)
    assert "tokens/s per user: the mean over requests of each request's decode rate" in out
    best = max((r for r in doc["rows"] if r.get("pareto")), key=lambda r: r["per_user_tokens_per_s"])
    assert (f"fast: {best['per_user_tokens_per_s']:,.0f} tokens/s per user (aggregate / live "
            f"{best['aggregate_per_live_tokens_per_s']:,.0f})") in out


def test_frontier_csv_has_both_per_user_columns(run_cli, tmp_path):
    import csv

    import yaml
    from frontier_toys import FAST, MODEL

    (tmp_path / "small.yaml").write_text(yaml.safe_dump(MODEL))
    (tmp_path / "fast.yaml").write_text(yaml.safe_dump(FAST))
    code, _, err = run_cli(["frontier", tmp_path / "small.yaml", "-H", tmp_path / "fast.yaml", "--context", "1000",
                            "--speeds", "2000", "--jobs", 1, "--output-tokens", 8, "--method", "dp", "-q",
                            "-o", tmp_path / "f.csv"])
    assert code == 0, err
    rows = list(csv.DictReader((tmp_path / "f.csv").open()))
    for r in rows:
        assert float(r["aggregate_per_live_tokens_per_s"]) * int(r["live_per_replica"]) == pytest.approx(
            float(r["aggregate_tokens_per_s"]), rel=1e-9)


# ----------------------------------------------------------------------------- 10: the hf extra on an ordinary machine
CPU_TORCH = "pip install torch --index-url https://download.pytorch.org/whl/cpu"


def test_readme_and_help_say_how_to_get_the_cpu_torch_before_the_hf_extra(run_cli):
    import re
    import tomllib

    root = ROOT
    readme = (root / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", readme, flags=re.S)
    steps = [b.strip().splitlines() for b in blocks if "placer[hf]" in b]
    assert steps == [[CPU_TORCH, "pip install 'placer[hf]'"]]      # the CPU build first, then the extra
    code, out, _ = run_cli(["import-hf", "--help"])
    assert code == 0 and " ".join(out.split()).count(CPU_TORCH) == 1
    # the extra asks for what the meta-device count imports, nothing more
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert sorted(re.split(r"[<>=!~]", d, maxsplit=1)[0] for d in extras["hf"]) == ["torch", "transformers"]
