"""Bad input on the command line: exit code 2, one line `error: <file>: <field>: <what>`, no traceback.

Every bad file is written into the test's temporary folder; the model cases run
`placer inspect BAD.yaml`, the hardware cases `placer inspect kimi-k3 --hardware BAD.yaml`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from dirs import BAD_INPUTS

ROOT_BAD_INPUTS = BAD_INPUTS

GOOD_MODEL = "name: t\nlayers:\n  - {kind: attention, params: 1000, kv_bytes_per_token: 4}\n"
GOOD_HARDWARE = "name: hw\ndevice: {memory: 44 GB}\nfleet: {racks: 1, per_rack: 2}\n"

COMPACT = """\
name: c
hidden_size: 64
num_layers: {num_layers}
pattern: "{pattern}"
mixers:
  gqa: {{type: {mixer_type}, num_heads: 4, num_kv_heads: 2, head_dim: 16}}
layer_types:
  A: {{mixer: gqa}}
"""


def _compact(num_layers=2, pattern="A*2", mixer_type="gqa"):
    return COMPACT.format(num_layers=num_layers, pattern=pattern, mixer_type=mixer_type)


# (case id, file name, content, field named in the message, a fragment of the message)
MODEL_CASES = [
    ("unknown-key", "m.yaml", GOOD_MODEL + "colour: blue\n", "colour", "unknown field"),
    ("unknown-nested-key", "m.yaml",
     "name: t\nlayers:\n  - {kind: attention, params: 1000, kv_bytes_per_token: 4, flavour: x}\n",
     "layers.0.flavour", "unknown field"),
    ("missing-layers", "m.yaml", "name: t\n", "(whole file)", "explicit form"),
    ("missing-name", "m.yaml", "layers:\n  - {kind: attention, params: 1000, kv_bytes_per_token: 4}\n",
     "name", "required"),
    ("negative-size", "m.yaml", "name: t\nlayers:\n  - {kind: attention, weight_bytes: -5 GB, kv_bytes_per_token: 4}\n",
     "layers.0.weight_bytes", "-5 GB"),
    ("negative-params", "m.yaml", "name: t\nlayers:\n  - {kind: attention, params: -1, kv_bytes_per_token: 4}\n",
     "layers.0.params", "greater than or equal to 0"),
    ("zero-size-layer", "m.yaml", "name: t\nlayers:\n  - {kind: attention, params: 0, kv_bytes_per_token: 4}\n",
     "layers.0", "zero size"),
    ("zero-hidden", "m.yaml", _compact().replace("hidden_size: 64", "hidden_size: 0"), "hidden_size", "greater than 0"),
    ("zero-layers", "m.yaml", _compact(num_layers=0), "num_layers", "greater than 0"),
    ("unknown-layer-kind", "m.yaml", "name: t\nlayers:\n  - {kind: convolution, params: 1000}\n",
     "layers.0.kind", "'attention'"),
    ("unknown-mixer-type", "m.yaml", _compact(mixer_type="rwkv"), "mixers.gqa.type", "'mla'"),
    ("attention-without-kv", "m.yaml", "name: t\nlayers:\n  - {kind: attention, params: 1000}\n",
     "layers.0.kv_bytes_per_token", "kv_bytes_per_token"),
    ("pattern-vs-num-layers", "m.yaml", _compact(num_layers=3), "pattern", "spells 2 layers but num_layers is 3"),
    ("pattern-unknown-letter", "m.yaml", _compact(pattern="A B"), "pattern", "'B'"),
    ("pattern-unbalanced", "m.yaml", _compact(pattern="(A A"), "pattern", "unbalanced"),
    ("context-unit-typo", "m.yaml", GOOD_MODEL + "default_workload: {context: 256kk}\n",
     "default_workload.context", "256kk"),
    ("size-unit-typo", "m.yaml", "name: t\nlayers:\n  - {kind: attention, weight_bytes: 2 GBB, kv_bytes_per_token: 4}\n",
     "layers.0.weight_bytes", "GBB"),
    ("non-utf8", "m.yaml", b"name: t\xff\xfe\nlayers: []\n", "(whole file)", "not UTF-8"),
    ("python-tag", "m.yaml", "name: t\nlayers: !!python/object/apply:os.system ['echo pwned']\n",
     "line 2", "python/object"),
    ("python-tag-top", "m.yaml", "!!python/object/new:dict {}\n", "line 1", "python/object"),
    ("yaml-syntax", "m.yaml", "name: [unclosed\n", "line 2", "invalid YAML"),
    ("duplicate-key", "m.yaml", GOOD_MODEL + "name: u\n", "line 4", "duplicate key 'name'"),
    ("empty-file", "m.yaml", "", "(whole file)", "mapping"),
    ("top-level-list", "m.yaml", "- a\n- b\n", "(whole file)", "mapping"),
    ("json-nan", "m.json", '{"name": "t", "layers": [{"kind": "attention", "params": NaN}]}', "(whole file)", "NaN"),
    ("unknown-architecture", "config.json", '{"architectures": ["FooForCausalLM"], "hidden_size": 8}',
     "architectures", "FooForCausalLM"),
]

HARDWARE_CASES = [
    ("unit-typo", "hw.yaml", GOOD_HARDWARE.replace("44 GB", "44 GBB"), "device.memory", "GBB"),
    ("zero-memory", "hw.yaml", GOOD_HARDWARE.replace("44 GB", "0 GB"), "device.memory", "positive"),
    ("negative-memory", "hw.yaml", GOOD_HARDWARE.replace("44 GB", "-44 GB"), "device.memory", "-44 GB"),
    ("boolean-memory", "hw.yaml", GOOD_HARDWARE.replace("44 GB", "yes"), "device.memory", "boolean"),
    ("bandwidth-typo", "hw.yaml", GOOD_HARDWARE.replace("per_rack: 2", "per_rack: 2, intra_rack_bandwidth: 2.4 Tbz"),
     "fleet.intra_rack_bandwidth", "Tbz"),
    ("nan-bandwidth", "hw.yaml", GOOD_HARDWARE.replace("44 GB", "44 GB, memory_bandwidth: .nan"),
     "device.memory_bandwidth", "nan"),
    ("unknown-key", "hw.yaml", GOOD_HARDWARE + "colour: red\n", "colour", "unknown field"),
    ("empty-fleet", "hw.yaml", GOOD_HARDWARE.replace("racks: 1, per_rack: 2", "groups: []"), "fleet", "empty"),
    ("zero-racks", "hw.yaml", GOOD_HARDWARE.replace("racks: 1", "racks: 0"), "fleet.racks", "greater than or equal to 1"),
    ("unknown-device-type", "hw.yaml", GOOD_HARDWARE.replace("per_rack: 2", "per_rack: 2, device: gpu9"),
     "fleet.device", "gpu9"),
    ("unknown-unavailable", "hw.yaml", GOOD_HARDWARE.replace("per_rack: 2", "per_rack: 2, unavailable: [r7w7]"),
     "fleet.unavailable.0", "r7w7"),
    ("duplicate-unavailable", "hw.yaml",
     GOOD_HARDWARE.replace("per_rack: 2", "per_rack: 2, unavailable: [r0w0, r0w0]"), "fleet.unavailable.1", "twice"),
    ("unknown-link-end", "hw.yaml",
     GOOD_HARDWARE.replace("per_rack: 2", "per_rack: 2, extra_links: [{a: r0w0, b: r9w9, latency_us: 1}]"),
     "fleet.extra_links.0.b", "r9w9"),
    ("python-tag", "hw.yaml", GOOD_HARDWARE.replace("44 GB", "!!python/object/apply:os.getcwd []"),
     "line 2", "python/object"),
    ("non-utf8", "hw.yaml", GOOD_HARDWARE.encode() + b"notes: \xc3\x28\n", "(whole file)", "not UTF-8"),
]


def _assert_one_line_error(code, out, err, file, field, fragment):
    assert code == 2, (code, err)
    assert out == ""
    assert "Traceback" not in err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert err.startswith(f"error: {file}: {field}: "), err
    assert fragment in err, err


@pytest.mark.parametrize("name, content, field, fragment",
                         [c[1:] for c in MODEL_CASES], ids=[c[0] for c in MODEL_CASES])
def test_bad_model_spec(run_cli, write, name, content, field, fragment):
    path = write(name, content)
    code, out, err = run_cli(["inspect", path])
    _assert_one_line_error(code, out, err, path, field, fragment)


@pytest.mark.parametrize("name, content, field, fragment",
                         [c[1:] for c in HARDWARE_CASES], ids=[c[0] for c in HARDWARE_CASES])
def test_bad_hardware_spec(run_cli, write, name, content, field, fragment):
    path = write(name, content)
    code, out, err = run_cli(["inspect", "kimi-k3", "--hardware", path])
    _assert_one_line_error(code, out, err, path, field, fragment)


def test_good_specs_load(run_cli, write):
    # the bad cases above are small edits of these two files, which load
    model, hardware = write("m.yaml", GOOD_MODEL), write("hw.yaml", GOOD_HARDWARE)
    code, out, err = run_cli(["inspect", model, "--hardware", hardware, "--json"])
    assert code == 0 and err == "" and '"concurrency_ceiling"' in out
    code, _, err = run_cli(["inspect", write("c.yaml", _compact())])
    assert code == 0, err


def test_missing_file(run_cli, tmp_path):
    path = tmp_path / "nope.yaml"
    _assert_one_line_error(*run_cli(["inspect", path]), path, "(whole file)", "file not found")
    _assert_one_line_error(*run_cli(["inspect", "kimi-k3", "--hardware", path]), path, "(whole file)", "file not found")


def test_directory_instead_of_file(run_cli, tmp_path):
    path = tmp_path / "dir.yaml"
    path.mkdir()
    _assert_one_line_error(*run_cli(["inspect", path]), path, "(whole file)", "directory")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root reads files regardless of mode")
def test_unreadable_file(run_cli, write):
    path = write("m.yaml", GOOD_MODEL)
    path.chmod(0)
    try:
        _assert_one_line_error(*run_cli(["inspect", path]), path, "(whole file)", "cannot read")
    finally:
        path.chmod(0o600)


def test_unknown_catalog_names(run_cli):
    _assert_one_line_error(*run_cli(["inspect", "no-such-model"]), "no-such-model", "model", "kimi-k3")
    _assert_one_line_error(*run_cli(["inspect", "kimi-k3", "--hardware", "no-such-fleet"]),
                           "no-such-fleet", "hardware", "wse-3t")


def test_real_process_prints_no_traceback(write):
    """The console entry point, run as a separate process, behaves as the in-process calls do."""
    bad = write("hw.yaml", GOOD_HARDWARE.replace("44 GB", "44 GBB"))
    proc = subprocess.run([sys.executable, "-c", "from placer.cli import main; main()",
                           "inspect", "kimi-k3", "--hardware", str(bad)],
                          capture_output=True, text=True, timeout=120)
    _assert_one_line_error(proc.returncode, proc.stdout, proc.stderr, bad, "device.memory", "GBB")


# every command reading a file, with {f} the file: a directory or a missing file reads the same everywhere
FILE_READERS = {
    "inspect": ["inspect", "{f}"],
    "solve": ["solve", "{f}", "-H", "wse-3t"],
    "inspect-hardware": ["inspect", "kimi-k3", "-H", "{f}"],
    "validate": ["validate", "{f}"],
    "export": ["export", "{f}", "--format", "json"],
    "run": ["run", "{f}"],
    "simulate": ["simulate", "{f}"],
    "plot": ["plot", "{f}", "-o", "x.png"],
    "import-hf": ["import-hf", "{f}"],
}


@pytest.mark.parametrize("argv", FILE_READERS.values(), ids=FILE_READERS.keys())
def test_directories_and_missing_files_read_the_same_everywhere(argv, run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "folder.json"
    folder.mkdir()
    missing = tmp_path / "missing.json"
    for path, what in ((folder, "is a directory, not a file"), (missing, "file not found")):
        code, out, err = run_cli([str(a).replace("{f}", str(path)) for a in argv])
        assert (code, out, err) == (2, "", f"error: {path}: (whole file): {what}\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder.json"]


@pytest.mark.parametrize("argv", [["solve", "kimi-k3", "-H", "wse-3t", "--method", "dp", "-o", "{d}"],
                                  ["export", "{m}", "--format", "json", "-o", "{d}"],
                                  ["plot", "{m}", "-o", "{d}"],
                                  ["import-hf", "{c}", "-o", "{d}"]], ids=["solve", "export", "plot", "import-hf"])
def test_an_output_that_is_a_directory_is_refused_before_any_work(argv, run_cli, tmp_path):
    from placer.specs.catalog import project_root

    mapping = project_root() / "tests" / "bad_inputs" / "map_for_other_model.json"
    config = project_root() / "tests" / "fixtures" / "hf" / "llama-3.1-405b.json"
    argv = [str(a).replace("{d}", str(tmp_path)).replace("{m}", str(mapping)).replace("{c}", str(config))
            for a in argv]
    code, out, err = run_cli(argv)
    assert (code, out) == (2, "")
    assert err == f"error: {tmp_path}: (whole file): is a directory; -o needs a file path\n"
    assert list(tmp_path.iterdir()) == []


def test_library_errors_name_the_flag_or_file_the_user_gave(run_cli, tmp_path):
    # the workload refuses the value by its field; the CLI names the flag that set it
    code, out, err = run_cli(["inspect", "kimi-k3", "--context", str(2**41)])
    assert (code, out, err) == (2, "", "error: --context: context_tokens: beyond 2^40 tokens\n")
    # a mapping the library knows only as <mapping> is named by the file the user passed
    from placer.specs.catalog import project_root

    ok = project_root() / "tests" / "bad_inputs"
    doc = json.loads((ok / "map_for_other_model.json").read_text())
    doc["route"] = doc["route"][:-1]
    path = tmp_path / "short-route.json"
    path.write_text(json.dumps(doc))
    for command in ("simulate", "run"):
        code, out, err = run_cli([command, path, "--model", ok / "ok" / "tiny.yaml", "-H", ok / "ok" / "tinyhw.yaml"])
        assert (code, out, err) == (2, "", f"error: {path}: route: expected 4 devices, one per node\n"), command


def test_simulate_without_any_speed_figure_is_refused(run_cli, tmp_path):
    """A hardware spec with memory only (no bandwidth, compute or overhead) can be placed on, but
    a simulation of it would cost every stage 0 us: one line naming the field, exit 2."""
    bad = ROOT_BAD_INPUTS / "ok"
    mapping = tmp_path / "tiny.json"
    code, _, err = run_cli(["solve", bad / "tiny.yaml", "-H", bad / "tinyhw.yaml", "-o", mapping])
    assert code == 0, err
    code, out, err = run_cli(["simulate", mapping])
    _assert_one_line_error(code, out, err, bad / "tinyhw.yaml", "device.memory_bandwidth",
                           "needs the device's memory bandwidth")
