"""``placer export --tier``: the runtimes' KV offloading settings, checked against their own argument
definitions (tests/vendored: vLLM 0.33.0's engine flags, SGLang 0.5.23's server fields with their
choices), the sizes by hand, and the runtimes without such a setting saying so."""

from __future__ import annotations

import shlex
import sys

import pytest
from dirs import SOLUTIONS, VENDORED

from placer.export import ExportOptions, export_mapping
from placer.mapping import read_mapping
from placer.specs.errors import InvalidSpec

sys.path.insert(0, str(VENDORED))

import sglang_0_5_23_cli as sglang_cli  # noqa: E402
import vllm_0_33_0_cli as vllm_cli  # noqa: E402

MAPPING = SOLUTIONS / "gpt-oss-120b__h100__contiguous.json"
SGLANG = {flag: info for info in sglang_cli.FIELDS.values() if not info["no_cli"] for flag in info["flags"]}


def _argv(text: str, marker: str) -> list[str]:
    line = next(x for x in text.splitlines() if marker in x and not x.startswith("#"))
    return shlex.split(line)


def _export(fmt: str, **kw):
    return export_mapping(read_mapping(MAPPING), fmt, options=ExportOptions(force=True, **kw))


def test_vllm_kv_offloading_flags():
    argv = _argv(_export("vllm", tier="host", tier_bytes=200 * 10**9).text, "vllm serve")
    for flag in ("--kv-offloading-size", "--kv-offloading-backend"):
        assert flag in vllm_cli.ENGINE_FLAGS and flag in argv
    # 200 GB on each of 1 tensor-parallel rank, in GiB: 200e9 / 2^30 = 186.26
    assert argv[argv.index("--kv-offloading-size") + 1] == "186.3"
    assert argv[argv.index("--kv-offloading-backend") + 1] == "native"


def test_sglang_hierarchical_cache_flags():
    argv = _argv(_export("sglang", tier="host", tier_bytes=200 * 10**9).text, "sglang.launch_server")
    for flag in ("--enable-hierarchical-cache", "--hicache-size", "--hicache-write-policy"):
        assert flag in SGLANG and flag in argv
    assert SGLANG["--hicache-size"]["type"] == "int" and argv[argv.index("--hicache-size") + 1] == "200"
    policy = argv[argv.index("--hicache-write-policy") + 1]
    assert policy in SGLANG["--hicache-write-policy"]["choices"] and policy == "write_through"


def test_without_a_tier_nothing_changes():
    for fmt, flag in (("vllm", "--kv-offloading-size"), ("sglang", "--enable-hierarchical-cache")):
        assert flag not in _export(fmt).text


def test_runtimes_without_offloading_say_so():
    res = _export("megatron", tier="host", tier_bytes=10**9)
    assert any("megatron has no KV offloading setting" in w for w in res.warnings)
    text = _export("vllm", tier="nvme", tier_bytes=10**9).text
    assert "--kv-offloading-size" not in text and "the nvme tier has no vllm launch flag" in text


def test_the_tier_size_comes_from_the_hardware_spec():
    # h100.yaml lists no tier: refused, naming the flag
    with pytest.raises(InvalidSpec, match="no 'host' tier"):
        _export("vllm", tier="host")
    # on wse-3t the (assumed) host tier is 1 TB a wafer
    wafer = read_mapping(SOLUTIONS / "llama-3.1-8b__wse-3t__contiguous.json")
    res = export_mapping(wafer, "sglang", options=ExportOptions(force=True, tier="host"))
    argv = _argv(res.text, "sglang.launch_server")
    assert argv[argv.index("--hicache-size") + 1] == "1000"


@pytest.fixture(scope="module")
def session_plan(tmp_path_factory):
    """A GPU plan made for sessions with a host tier (placer solve --sessions --tier host -o)."""
    from conftest import run_cli

    out = tmp_path_factory.mktemp("offload") / "plan.json"
    code, _out, err = run_cli(["solve", "llama-3.1-8b", "-H", "b200", "--sessions", "chat", "--ttft-target", "500",
                               "--tier", "host", "-q", "-o", out])
    assert code == 0, err
    return read_mapping(out)


def test_the_tier_comes_from_the_mapping(session_plan):
    rec = session_plan["sessions"]
    assert rec["tier"] == "host" and rec["tier_bytes_per_device"] > 0
    tp = session_plan["parallel"]["tp"]
    vllm = export_mapping(session_plan, "vllm", options=ExportOptions(force=True))
    argv = _argv(vllm.text, "vllm serve")
    assert all(flag in vllm_cli.ENGINE_FLAGS for flag in ("--kv-offloading-size", "--kv-offloading-backend"))
    # the plan's tier bytes per GPU over the stage's tensor-parallel ranks, in GiB
    assert argv[argv.index("--kv-offloading-size") + 1] == f"{rec['tier_bytes_per_device'] * tp / 2**30:.1f}"
    sglang = export_mapping(session_plan, "sglang", options=ExportOptions(force=True))
    argv = _argv(sglang.text, "sglang.launch_server")
    assert argv[argv.index("--hicache-size") + 1] == str(rec["tier_bytes_per_device"] // 10**9)
    assert "--enable-hierarchical-cache" in argv and "--enable-hierarchical-cache" in SGLANG
    # a runtime without the setting says so; --tier-size still overrides the plan's size
    torch = export_mapping(session_plan, "torch", options=ExportOptions(force=True))
    assert any("torch has no KV offloading setting: the host tier is not exported" in w for w in torch.warnings)
    sized = _argv(export_mapping(session_plan, "sglang", options=ExportOptions(force=True, tier="host",
                                                                             tier_bytes=7 * 10**9)).text,
                  "sglang.launch_server")
    assert sized[sized.index("--hicache-size") + 1] == "7"


def test_a_session_plan_without_a_tier_exports_none(session_plan):
    import copy

    doc = copy.deepcopy(session_plan)
    doc["sessions"].update(tier=None, parked=0, tier_bytes_per_device=0,
                           sessions_held=doc["sessions"]["resident"])
    assert "--kv-offloading-size" not in export_mapping(doc, "vllm", options=ExportOptions(force=True)).text
