"""`placer inspect`: the per-layer table and the per-device view of the published arithmetic."""

from __future__ import annotations

import json

import pytest


def _inspect_json(run_cli, *args):
    code, out, err = run_cli(["inspect", *args, "--json"])
    assert code == 0, err
    assert err == ""
    return json.loads(out)


@pytest.fixture(scope="module")
def k3_doc(run_cli):
    return _inspect_json(run_cli, "kimi-k3", "--hardware", "wse-3t")


def test_device_view_reproduces_the_published_arithmetic(k3_doc):
    d = k3_doc["device"]
    assert d["name"] == "wse-3t"
    assert d["memory_bytes"] == 44_000_000_000
    # 32,258,064,516 params x 4 bits = 16,129,032,258 B per layer, either kind
    assert d["weight_bytes_per_layer"] == {"linear_attention": 16_129_032_258, "attention": 16_129_032_258}
    # linear: 44e9 // (16,129,032,258 + 184 x 4,341,760 = 16,927,916,098) = 2 (2.60)
    # dense:  44e9 // (16,129,032,258 + 184 x 150,994,944 = 43,912,101,954) = 1
    assert d["layers_per_device"] == {"linear_attention": 2, "attention": 1}
    # 44,000,000,000 - 16,129,032,258 = 27,870,967,742 B beside one dense layer
    assert d["kv_reserve_bytes"] == 27_870_967_742
    # 576 B/token x 262,144 tokens
    assert d["kv_bytes_per_request_per_layer"] == 150_994_944
    # floor(27,870,967,742 / 150,994,944) = floor(184.58) = 184
    assert d["concurrency_ceiling"] == 184
    assert d["context_tokens"] == 262_144


def test_totals_and_rows(k3_doc):
    t = k3_doc["totals"]
    assert k3_doc["model"] == "kimi-k3"
    assert t["params"] == 2_999_999_999_988                 # 93 x 32,258,064,516
    assert t["weight_bytes"] == 1_499_999_999_994           # 93 x 16,129,032,258
    assert t["kv_bytes_per_token"] == 24 * 576 == 13_824
    assert t["state_bytes_per_request"] == 69 * 4_341_760 == 299_581_440
    rows = k3_doc["layers"]
    assert len(rows) == 93
    keys = {"index", "name", "kind", "mixer", "ffn", "params", "weight_bytes", "kv_bytes_per_token",
            "state_bytes_per_request", "activation_bytes_per_token"}
    assert keys <= set(rows[0])
    assert (rows[0]["kind"], rows[0]["mixer"], rows[0]["kv_bytes_per_token"], rows[0]["state_bytes_per_request"]) \
        == ("linear_attention", "kda", 0, 4_341_760)
    assert (rows[3]["kind"], rows[3]["mixer"], rows[3]["kv_bytes_per_token"], rows[3]["state_bytes_per_request"]) \
        == ("attention", "mla", 576, 0)
    assert [r["index"] for r in rows if r["kind"] == "attention"] == list(range(3, 92, 4)) + [92]
    assert {r["activation_bytes_per_token"] for r in rows} == {14_336}     # 7168 x 2 B


def test_no_device_without_hardware(run_cli):
    doc = _inspect_json(run_cli, "kimi-k3")
    assert "device" not in doc
    assert doc["totals"]["params"] == 2_999_999_999_988


def test_context_flag_changes_the_ceiling(run_cli):
    d = _inspect_json(run_cli, "kimi-k3", "--hardware", "wse-3t", "--context", "128k")["device"]
    assert d["kv_bytes_per_request_per_layer"] == 576 * 131_072 == 75_497_472
    # floor(27,870,967,742 / 75,497,472) = floor(369.16) = 369
    assert d["concurrency_ceiling"] == 369


def test_weight_bits_flag(run_cli):
    d = _inspect_json(run_cli, "kimi-k3", "--hardware", "wse-3t", "--weight-bits", "8")["device"]
    # 32,258,064,516 B per layer at 8 bits; 44e9 - 32,258,064,516 = 11,741,935,484 B of reserve
    assert d["kv_reserve_bytes"] == 11_741_935_484
    # floor(11,741,935,484 / 150,994,944) = floor(77.76) = 77
    assert d["concurrency_ceiling"] == 77
    # a dense layer with 184 requests (60,041,134,212 B) no longer fits; one linear layer does
    assert d["layers_per_device"] == {"linear_attention": 1, "attention": 0}


def test_smaller_device(run_cli):
    d = _inspect_json(run_cli, "kimi-k3", "--hardware", "wse-2")["device"]
    # 40e9 - 16,129,032,258 = 23,870,967,742; floor(/ 150,994,944) = floor(158.09) = 158
    assert d["kv_reserve_bytes"] == 23_870_967_742
    assert d["concurrency_ceiling"] == 158
    assert d["layers_per_device"]["attention"] == 0


def test_text_output(run_cli):
    code, out, err = run_cli(["inspect", "kimi-k3", "--hardware", "wse-3t"])
    assert code == 0 and err == ""
    assert "concurrency ceiling: floor(27,870,967,742 / 150,994,944) = 184" in out
    assert "KV reserve beside one dense layer: 27.87 GB (27,870,967,742 B)" in out
    assert "2,999,999,999,988" in out
    # title, workload, header, 93 layer rows and a total row before the device block
    table = out.split("\n\nper device")[0].splitlines()
    assert table[1].startswith("workload: context 256k (262,144 tokens), concurrency 184, weights 4-bit")
    assert len(table) == 1 + 1 + 1 + 93 + 1


def test_inspect_explicit_spec_file(run_cli, write):
    path = write("toy.yaml", """\
name: toy
layers:
  - {kind: linear_attention, weight_bytes: 2684354560, state_bytes_per_request: 4341760}
  - {kind: attention, params: 1000000, kv_bytes_per_token: 576}
""")
    doc = _inspect_json(run_cli, path, "--weight-bits", "4", "--context", "1k")
    rows = doc["layers"]
    assert [r["weight_bytes"] for r in rows] == [2_684_354_560, 500_000]   # fixed; 1e6 x 4 bits
    assert [r["kv_bytes_per_token"] for r in rows] == [0, 576]
    assert rows[1]["kv_bytes_per_request"] == 576 * 1024
    assert doc["totals"]["weight_bytes"] == 2_684_354_560 + 500_000 == 2_684_854_560


def test_racks_needs_hardware(run_cli):
    code, out, err = run_cli(["inspect", "kimi-k3", "--racks", "5"])
    assert code == 2 and out == ""
    assert err.startswith("error: ") and err.count("\n") == 1 and "racks" in err
