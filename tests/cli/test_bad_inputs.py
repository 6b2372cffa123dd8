"""The bad-input gallery: every malformed file in ``tests/bad_inputs/`` through the real CLI.

Each case must end with exit code 2 and exactly one line on stderr, ``error: <file>: <field>: ...``,
naming the file (or the flag) and the field; no traceback; and nothing written or modified in the
output location (each run happens in an empty working directory with ``-o`` pointing into it).
``tests/bad_inputs/README.md`` lists the same files and fields; a test keeps the two in step.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
from dirs import BAD_INPUTS

from placer.specs.catalog import project_root
from placer.specs.spec_io import MAX_SPEC_BYTES

GALLERY = BAD_INPUTS
ONE_LINE_FORMAT = re.compile(r"^error: \S[^:]*(?::\d+)?: (\(whole file\)|[^\s:][^:]*): \S.*$")
OK_MODEL = GALLERY / "ok" / "tiny.yaml"
OK_HARDWARE = GALLERY / "ok" / "tinyhw.yaml"

# The commands each kind of input goes through; {f} is the gallery file, {out} a path in the empty cwd.
MODEL_RUNS = {
    "inspect": ["inspect", "{f}", "--hardware", OK_HARDWARE],
    "solve": ["solve", "{f}", "--hardware", OK_HARDWARE, "--time-limit", "5", "--threads", "1", "-o", "{out}"],
}
HARDWARE_RUNS = {
    "inspect": ["inspect", OK_MODEL, "--hardware", "{f}"],
    "solve": ["solve", OK_MODEL, "--hardware", "{f}", "--time-limit", "5", "--threads", "1", "-o", "{out}"],
}
HF_RUNS = {
    "import-hf": ["import-hf", "{f}", "-o", "{out}"],
    "inspect": ["inspect", "{f}"],
}
MAPPING_READ_RUNS = {
    "validate": ["validate", "{f}", "--model", OK_MODEL, "--hardware", OK_HARDWARE],
    "export": ["export", "{f}", "--format", "json", "--model", OK_MODEL, "--hardware", OK_HARDWARE, "-o", "{out}"],
}
# A readable mapping with violations is exit 1 for `validate` (it reports them); `export` refuses it: exit 2.
MAPPING_VIOLATION_RUNS = {"export": MAPPING_READ_RUNS["export"]}

# file -> the substring its one-line error must contain (the field, or what is wrong when no field applies)
MODEL_CASES = {
    "model_layers_wrong_type.yaml": ": layers: ",
    "model_missing_name.yaml": ": name: required field is missing",
    "model_name_wrong_type.yaml": ": name: ",
    "model_negative_weight.yaml": ": layers.0.weight_bytes: ",
    "model_zettabyte_layer.yaml": ": layers.1.weight_bytes: ",
    "model_nan_weight.yaml": ": layers.0.weight_bytes: ",
    "model_inf_params.yaml": ": layers.0.params: ",
    "model_absurd_params.yaml": ": layers.0.params: ",
    "model_unknown_kind.yaml": ": layers.0.kind: ",
    "model_unknown_field.yaml": ": layers.0.colour: unknown field",
    "model_python_object_tag.yaml": ": line 4: ",
    "model_python_name_tag.yaml": ": line 2: ",
    "model_duplicate_key.yaml": "duplicate key 'name'",
    "model_duplicate_layer_names.yaml": ": layers.2.name: duplicate layer name",
    "model_empty_layers.yaml": "is empty",
    "model_pattern_mismatch.yaml": ": pattern: ",
    "model_pattern_unknown_letter.yaml": ": pattern: ",
    "model_pattern_unbalanced.yaml": ": pattern: ",
    "model_mixer_incomplete.yaml": ": mixers.attn: ",
    "model_unknown_mixer_ref.yaml": ": layer_types.A.mixer: ",
    "model_attention_without_kv.yaml": ": layers.0.kv_bytes_per_token: ",
    "model_boolean_size.yaml": ": layers.0.weight_bytes: ",
    "model_unit_typo.yaml": ": layers.0.weight_bytes: ",
    "model_top_level_list.yaml": "mapping at the top level",
    "model_empty_file.yaml": "mapping at the top level",
    "model_syntax_error.yaml": ": line 5: invalid YAML",
    "model_negative_concurrency.yaml": ": default_workload.concurrency: ",
    "model_zero_context.yaml": ": default_workload.context: ",
    "model_deep_nesting.yaml": "nested too deeply",
    "model_alias_bomb.yaml": "document expands to",
    "model_not_utf8.yaml": "not UTF-8",
}
HARDWARE_CASES = {
    "hw_missing_memory.yaml": ": device.memory: required field is missing",
    "hw_negative_memory.yaml": ": device.memory: ",
    "hw_zero_memory.yaml": ": device.memory: ",
    "hw_absurd_memory.yaml": ": device.memory: ",
    "hw_nan_latency.yaml": ": fleet.intra_rack_latency_us: ",
    "hw_negative_latency.yaml": ": fleet.inter_rack_latency_us: ",
    "hw_zero_racks.yaml": ": fleet.racks: ",
    "hw_empty_groups.yaml": ": fleet: groups is empty",
    "hw_all_unavailable.yaml": ": fleet.unavailable: ",
    "hw_unavailable_unknown.yaml": ": fleet.unavailable.0: unknown device 'r9w9'",
    "hw_unavailable_twice.yaml": ": fleet.unavailable.1: ",
    "hw_link_unknown_device.yaml": ": fleet.extra_links.0.b: unknown device 'r7w0'",
    "hw_link_twice.yaml": ": fleet.extra_links.1: ",
    "hw_self_link.yaml": ": fleet.extra_links.0: ",
    "hw_link_inf_latency.yaml": ": fleet.extra_links.0.latency_us: ",
    "hw_unknown_group_type.yaml": ": fleet.groups.1.device: ",
    "hw_unknown_topology.yaml": ": fleet.inter_rack_topology: ",
    "hw_too_many_devices.yaml": ": fleet: ",
    "hw_python_object_tag.yaml": ": line 3: ",
    "hw_bandwidth_word.yaml": ": device.memory_bandwidth: ",
    "hw_fleet_wrong_type.yaml": ": fleet: ",
    "hw_both_device_forms.yaml": "device_types",
    "hw_not_utf8.yaml": "not UTF-8",
    "hw_alias_bomb.yaml": "document expands to",
}
HF_CASES = {
    "hf_unknown_architecture.json": ": model_type: family 'foobar' is not one the interpreter lists",
    "hf_missing_hidden_size.json": ": hidden_size: ",
    "hf_negative_layers.json": ": num_hidden_layers: ",
    "hf_heads_wrong_type.json": ": num_attention_heads: ",
    "hf_absurd_vocab.json": ": vocab_size: ",
    "hf_fractional_kv_heads.json": ": num_key_value_heads: ",
    "hf_tie_not_bool.json": ": tie_word_embeddings: ",
    "hf_empty_architectures.json": ": architectures: ",
    "hf_overflow_number.json": ": hidden_size: ",
    "hf_nan.json": ": intermediate_size: expected an integer, got float nan",   # NaN is valid JSON to Python
    "hf_truncated.json": "invalid JSON",
    "hf_duplicate_key.json": "duplicate key 'hidden_size'",
    "hf_top_level_array.json": "mapping at the top level",
    "hf_not_utf8.json": "not UTF-8",
}
MAPPING_READ_CASES = {
    "map_truncated.json": "invalid JSON",
    "map_schema_99.json": ": /schema_version: ",
    "map_missing_stages.json": ": /stages: required field is missing",
    "map_stages_wrong_type.json": ": /stages: ",
    "map_nan.json": "NaN",
    "map_not_utf8.json": "not UTF-8",
    "map_duplicate_key.json": "duplicate key 'mode'",
    "map_top_level_array.json": "JSON object",
    "map_negative_bytes.json": ": /stages/0/bytes/weights: ",
    "map_unknown_mode.json": ": /mode: ",
    "map_negative_concurrency.json": ": /workload/concurrency: ",
    "map_absurd_context.json": ": /workload/context_tokens: ",
}
MAPPING_VIOLATION_CASES = {
    "map_device_twice.json": "device_reused",
    "map_route_cycle.json": "violation",
    "map_unknown_device.json": "unknown_device",
    "map_unknown_layer.json": "unknown_layer",
    "map_unknown_model.json": "spec_name_mismatch",
}
# A valid mapping of the tiny model, handed another model: every node and hash is wrong.
OTHER_MODEL_RUNS = {"export": ["export", "{f}", "--format", "json", "--model", "kimi-k3",
                               "--hardware", OK_HARDWARE, "-o", "{out}"]}
OTHER_MODEL_CASES = {"map_for_other_model.json": "spec_name_mismatch"}

GROUPS = [
    (MODEL_CASES, MODEL_RUNS),
    (HARDWARE_CASES, HARDWARE_RUNS),
    (HF_CASES, HF_RUNS),
    (MAPPING_READ_CASES, MAPPING_READ_RUNS),
    (MAPPING_VIOLATION_CASES, MAPPING_VIOLATION_RUNS),
    (OTHER_MODEL_CASES, OTHER_MODEL_RUNS),
]
ALL_CASES = {name: field for cases, _ in GROUPS for name, field in cases.items()}

# Bad flags: (flags, the flag the error must name, the field substring). Workload flags go through
# both `inspect` and `solve`; placement flags through `solve` only.
WORKLOAD_FLAG_CASES = {
    "context-zero": (["--context", "0"], "--context", ": context: "),
    "context-unit-typo": (["--context", "12q"], "--context", ": context: "),
    "concurrency-negative": (["--concurrency", "-1"], "--concurrency", ": concurrency: "),
    "weight-bits-zero": (["--weight-bits", "0"], "--weight-bits", ": weight_bits: "),
    "kv-bits-huge": (["--kv-bits", "1000"], "--kv-bits", ": kv_bits: "),
    "racks-zero": (["--racks", "0"], "--racks", ": racks: "),
}
PLACEMENT_FLAG_CASES = {
    "pin-missing-device": (["--pin", "0=r99w9"], "--pin", ": pins: unknown device 'r99w9'"),
    "pin-missing-layer": (["--pin", "57=r0w0"], "--pin", ": pins: "),
    "pin-garbage": (["--pin", "first=r0w0"], "--pin", ": pins: "),
    "granularity-zero-shards": (["--mode", "split", "--granularity", "shards:0"], "--granularity", ": granularity: "),
    "mode-unknown": (["--mode", "diagonal"], "--mode", ": mode: "),
    "time-limit-negative": (["--time-limit", "-3"], "--time-limit", ": time_limit: "),
}


def _flag_params():
    out = []
    for command in ("solve", "inspect"):
        cases = {**WORKLOAD_FLAG_CASES, **(PLACEMENT_FLAG_CASES if command == "solve" else {})}
        for case, (flags, option, field) in cases.items():
            out.append(pytest.param(command, flags, option, field, id=f"{case}-{command}"))
    return out


def _params():
    out = []
    for cases, runs in GROUPS:
        for name, field in cases.items():
            for command, argv in runs.items():
                out.append(pytest.param(name, argv, field, id=f"{name}-{command}"))
    return out


def _snapshot(root: Path) -> dict[str, str]:
    """Every file and folder under ``root`` with a hash of its content."""
    snap = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        snap[rel] = "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
    return snap


def _run_in_empty_dir(run_cli, tmp_path: Path, monkeypatch, argv: list) -> tuple[int, str, str, Path]:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    before = _snapshot(work)
    code, out, err = run_cli(argv)
    assert _snapshot(work) == before, "a failing command wrote or changed files"
    return code, out, err, work


def _assert_one_line_error(code: int, out: str, err: str, names: str, field: str) -> str:
    assert "Traceback" not in out + err
    assert code == 2, f"exit {code}; stderr: {err!r}"
    lines = err.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {lines!r}"
    line = lines[0]
    # the one format: error: <file or name>: <field, or (whole file)>: <what is wrong>
    assert ONE_LINE_FORMAT.match(line), line
    assert ": -:" not in line, line
    assert line.removeprefix("error: ").split(": ")[0].endswith(names), f"{names!r} is not what {line!r} names"
    assert field in line, f"{field!r} not in {line!r}"
    assert out == "", f"a failing command printed {out!r}"
    return line


@pytest.mark.parametrize("name, argv, field", _params())
def test_gallery_file_gives_one_line_error(name, argv, field, run_cli, tmp_path, monkeypatch):
    path = GALLERY / name
    original = path.read_bytes()
    argv = [str(a).replace("{f}", str(path)).replace("{out}", "out/result.json") for a in argv]
    code, out, err, _ = _run_in_empty_dir(run_cli, tmp_path, monkeypatch, argv)
    _assert_one_line_error(code, out, err, path.name, field)
    assert path.read_bytes() == original


@pytest.mark.parametrize("command, flags, option, field", _flag_params())
def test_bad_flag_gives_one_line_error(command, flags, option, field, run_cli, tmp_path, monkeypatch):
    argv = [command, OK_MODEL, "--hardware", OK_HARDWARE, *flags]
    if command == "solve":
        argv += ["--threads", "1", "-o", "out/result.json"]
    code, out, err, _ = _run_in_empty_dir(run_cli, tmp_path, monkeypatch, argv)
    _assert_one_line_error(code, out, err, option, field)


def test_object_constructing_tags_never_run(run_cli, tmp_path, monkeypatch):
    """The ``!!python/...`` files ask for ``touch PWNED_BY_PLACER_GALLERY``; it must never happen."""
    for name in ("model_python_object_tag.yaml", "hw_python_object_tag.yaml"):
        argv = (["inspect", GALLERY / name] if name.startswith("model")
                else ["inspect", OK_MODEL, "--hardware", GALLERY / name])
        work = tmp_path / name
        work.mkdir()
        monkeypatch.chdir(work)
        code, _, err = run_cli(argv)
        assert code == 2 and "could not determine a constructor" in err
        assert not (work / "PWNED_BY_PLACER_GALLERY").exists()
        assert not (project_root() / "PWNED_BY_PLACER_GALLERY").exists()


@pytest.mark.parametrize("kind", ["model", "hardware", "mapping"])
def test_huge_file_is_refused_before_parsing(kind, run_cli, tmp_path, monkeypatch):
    """A spec over the size limit (generated here, not committed) is refused by size, naming the file."""
    suffix = ".json" if kind == "mapping" else ".yaml"
    huge = tmp_path / f"huge_{kind}{suffix}"
    line = "# " + "x" * 1000 + "\n"
    with huge.open("w") as fh:
        fh.write("{\n" if kind == "mapping" else "name: huge\n")
        for _ in range(MAX_SPEC_BYTES // len(line) + 2):
            fh.write(line if kind != "mapping" else '  "pad": "' + "x" * 1000 + '",\n')
    assert huge.stat().st_size > MAX_SPEC_BYTES
    argv = {"model": ["inspect", huge], "hardware": ["inspect", OK_MODEL, "--hardware", huge],
            "mapping": ["validate", huge]}[kind]
    code, out, err, _ = _run_in_empty_dir(run_cli, tmp_path, monkeypatch, argv)
    _assert_one_line_error(code, out, err, huge.name, f"limited to {MAX_SPEC_BYTES}")


def test_gallery_is_large_and_every_file_has_a_case():
    files = {p.name for p in GALLERY.iterdir() if p.is_file() and p.name != "README.md"}
    assert len(files) >= 40
    assert files == set(ALL_CASES), f"files without a case: {sorted(files - set(ALL_CASES))}; " \
                                    f"cases without a file: {sorted(set(ALL_CASES) - files)}"


def test_readme_lists_every_file_with_its_field():
    """``bad_inputs/README.md`` has one table row per file: ``| file | expected in the error | ... |``."""
    rows = {}
    for line in (GALLERY / "README.md").read_text(encoding="utf-8").splitlines():
        m = re.match(r"\|\s*`([^`]+)`\s*\|\s*`([^`]+)`\s*\|", line)
        if m:
            rows[m.group(1)] = m.group(2)
    assert rows == ALL_CASES


def test_companion_specs_are_valid(run_cli, tmp_path, monkeypatch):
    """The gallery's good companions load and solve, so every failure above is the bad file's."""
    code, out, err, work = _run_in_empty_dir(run_cli, tmp_path, monkeypatch, ["inspect", OK_MODEL, "--hardware", OK_HARDWARE])
    assert code == 0 and err == ""
    monkeypatch.chdir(work)
    code, out, err = run_cli(["solve", OK_MODEL, "--hardware", OK_HARDWARE, "--method", "dp", "-o", "m.json"])
    assert code == 0, err
    assert (work / "m.json").exists()
    code, out, err = run_cli(["validate", "m.json", "--model", OK_MODEL, "--hardware", OK_HARDWARE])
    assert code == 0, out + err
    code, out, err = run_cli(["export", GALLERY / "map_for_other_model.json", "--format", "json",
                              "--model", OK_MODEL, "--hardware", OK_HARDWARE])
    assert code == 0, err


# ----------------------------------------------------------------------------- regenerating the mappings
def regenerate_mapping_gallery() -> None:
    """Rewrite the ``map_*.json`` files from a fresh DP placement of the companions.

    Run ``PYTHONPATH=tests python tests/cli/test_bad_inputs.py`` when the mapping format or the spec hash changes: every
    mapping starts as the valid mapping of ``ok/tiny.yaml`` on ``ok/tinyhw.yaml`` and gets one defect.
    """
    import copy

    from placer import load_fleet, load_model, make_instance, workload_for
    from placer.algorithms import place
    from placer.mapping import build_mapping, dumps_mapping

    model, fleet = load_model(OK_MODEL), load_fleet(OK_HARDWARE)
    inst = make_instance(model, fleet, workload_for(model))
    base = build_mapping(inst, place(inst, "dp"))
    base["model"]["source"], base["hardware"]["source"] = "ok/tiny.yaml", "ok/tinyhw.yaml"
    base["summary"]["solve_seconds"] = 0.01
    text = dumps_mapping(base)
    first_concurrency = f'"max_concurrency": {base["stages"][0]["max_concurrency"]},'

    def edited(**changes):
        doc = copy.deepcopy(base)
        for path, value in changes.items():
            *parents, last = path.split("/")
            target = doc
            for p in parents:
                target = target[int(p)] if isinstance(target, list) else target[p]
            if value is _DELETE:
                del target[last]
            elif isinstance(target, list):
                target[int(last)] = value
            else:
                target[last] = value
        return dumps_mapping(doc)

    stage0, stage1 = base["stages"][0]["layers"], base["stages"][1]["layers"]
    files = {
        "map_truncated.json": text[: len(text) * 2 // 3],
        "map_schema_99.json": edited(schema_version=99),
        "map_for_other_model.json": text,
        "map_missing_stages.json": edited(stages=_DELETE),
        "map_stages_wrong_type.json": edited(stages="all of them"),
        "map_nan.json": text.replace(first_concurrency, '"max_concurrency": NaN,', 1),
        "map_duplicate_key.json": text.replace('"mode": "contiguous",', '"mode": "contiguous",\n  "mode": "free",'),
        "map_top_level_array.json": "[\n" + text + "]\n",
        "map_negative_bytes.json": edited(**{"stages/0/bytes/weights": -8_000_000_000}),
        "map_unknown_mode.json": edited(mode="diagonal"),
        "map_negative_concurrency.json": edited(**{"workload/concurrency": -2}),
        "map_absurd_context.json": edited(**{"workload/context_tokens": 10**30}),
        "map_device_twice.json": edited(**{"stages/1/device": "r0w0", "route": ["r0w0"] * 4}),
        "map_route_cycle.json": edited(**{"stages/0/layers": [stage0[0], stage1[0]],
                                          "stages/1/layers": [stage0[1], stage1[1]],
                                          "route": ["r0w0", "r0w1", "r0w0", "r0w1"]}),
        "map_unknown_device.json": edited(**{"stages/1/device": "r9w9", "route": ["r0w0", "r0w0", "r9w9", "r9w9"]}),
        "map_unknown_layer.json": edited(**{"stages/0/layers": [*stage0, "layers.7"]}),
        "map_unknown_model.json": edited(**{"model/name": "gpt-9", "model/source": "gpt-9"}),
    }
    for name, content in files.items():
        (GALLERY / name).write_text(content, encoding="utf-8")
    (GALLERY / "map_not_utf8.json").write_bytes(text.replace('"method": "dp"', '"method": "d\u00e9p"').encode("latin-1"))


_DELETE = object()


if __name__ == "__main__":
    regenerate_mapping_gallery()
