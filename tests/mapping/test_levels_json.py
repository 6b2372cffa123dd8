"""Every objective level in the JSON of solve and the mapping's summary, exactly; the schema asks
for them from version 3; the concurrency level's search stays inside the workload's limit."""

from __future__ import annotations

import copy
import json

import pytest

from placer.mapping import check_mapping
from placer.problem.placement import Level, Result, Status, levels_doc
from placer.specs.errors import InvalidSpec

# three 10 GB layers, two per 25 GB device (4.2376 us inside a rack): two stages, one hop
MODEL = """\
name: three
layers:
  - {kind: attention, weight_bytes: 10 GB, kv_bytes_per_token: 1 kB}
  - {kind: attention, weight_bytes: 10 GB, kv_bytes_per_token: 1 kB}
  - {kind: attention, weight_bytes: 10 GB, kv_bytes_per_token: 1 kB}
"""
HARDWARE = """\
name: pair
device: {memory: 25 GB}
fleet: {racks: 1, per_rack: 3, intra_rack_latency_us: 4.2376, inter_rack_latency_us: 9}
"""


def test_solve_json_states_every_level_exactly(run_cli, write):
    m, h = write("three.yaml", MODEL), write("pair.yaml", HARDWARE)
    code, out, err = run_cli(["solve", m, "-H", h, "--context", "1k", "--concurrency", "1", "--json",
                              "--time-limit", "10"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["schema_version"] == 3
    # 2 devices: [0, 1] holds 20 GB + 2 x 1 kB x 1024 per request; the concurrency level keeps 2
    # devices and maximises the smaller stage's ceiling: the 2-layer stage holds (25e9 - 20e9 - act)
    # / 2,048,000 B per request; the latency level is the one hop at 4.2376 us, not 4.238
    levels = doc["summary"]["levels"]
    assert [lv["name"] for lv in levels] == ["devices", "concurrency", "latency"]
    assert levels[0] == {"name": "devices", "value": 2, "unit": "devices", "bound": 2, "proven": True}
    assert levels[2] == {"name": "latency", "value": 4.2376, "unit": "us", "bound": 4.2376, "proven": True}
    act = 25 * 10**9 - 20 * 10**9 - doc["stages"][0]["bytes"]["activations"]
    ceiling = act // (2 * 1000 * 1024)
    assert levels[1] == {"name": "concurrency", "value": ceiling, "unit": "live requests", "bound": ceiling,
                         "proven": True}
    assert doc["summary"]["concurrency_ceiling"] == ceiling
    check_mapping(doc)


def test_schema_3_requires_the_levels_and_older_versions_still_read(run_cli, write, tmp_path):
    m, h = write("three.yaml", MODEL), write("pair.yaml", HARDWARE)
    code, out, _ = run_cli(["solve", m, "-H", h, "--context", "1k", "--json", "--time-limit", "10"])
    doc = json.loads(out)
    bare = copy.deepcopy(doc)
    del bare["summary"]["levels"]
    with pytest.raises(InvalidSpec) as err:
        check_mapping(bare, "m.json")
    assert (err.value.field, err.value.message) == ("/summary/levels", "required field is missing")
    bare["schema_version"] = 2
    assert check_mapping(bare) is bare
    wrong = copy.deepcopy(doc)
    wrong["summary"]["levels"][0]["unit"] = "wafers"
    with pytest.raises(InvalidSpec) as err:
        check_mapping(wrong)
    assert err.value.field == "/summary/levels/0/unit"


def test_a_method_without_levels_states_its_device_count():
    r = Result("greedy", "contiguous", Status.HEURISTIC, assignment=(0, 1), devices_used=2, lower_bound_devices=2)
    assert levels_doc(r) == [{"name": "devices", "value": 2, "unit": "devices", "bound": 2, "proven": True}]
    r = r.replace(lower_bound_devices=1)
    assert levels_doc(r) == [{"name": "devices", "value": 2, "unit": "devices", "bound": 1, "proven": False}]
    assert levels_doc(Result("greedy", "contiguous", Status.UNKNOWN)) == []


def test_level_text_is_exact_and_says_when_capped():
    assert Level("latency", 4.2376, 4.0, False).describe() == "latency 4.2376 us (bound 4.0 us, not proven)"
    assert Level("concurrency", 10**12, 2 * 10**12, False, cap=10**9).describe() == (
        "concurrency 1000000000000 live requests (searched up to the workload limit of 1,000,000,000 live "
        "requests, bound 2000000000000 live requests, not proven)")
    assert Level("concurrency", 5, 5, True, cap=10**9).to_dict()["cap"] == 10**9


# a 1 B layer beside a 3.3e14 B one, 1 B of KV a token: every probe up to 1e9 live requests fits
ADVERSARIAL = """\
name: adversarial
layers:
  - {kind: attention, weight_bytes: 1, kv_bytes_per_token: 1}
  - {kind: attention, weight_bytes: 330000000000000, kv_bytes_per_token: 1}
"""
BIG = """\
name: big
device: {memory: 400 TB}
fleet: {racks: 1, per_rack: 2, intra_rack_latency_us: 2, inter_rack_latency_us: 3}
"""


def test_the_concurrency_search_stays_inside_the_workload_limit(run_cli, write):
    m, h = write("adversarial.yaml", ADVERSARIAL), write("big.yaml", BIG)
    code, out, err = run_cli(["solve", m, "-H", h, "--concurrency", "0", "--context", "8", "--json",
                              "--time-limit", "20"])
    assert code == 0, err
    doc = json.loads(out)
    level = next(lv for lv in doc["summary"]["levels"] if lv["name"] == "concurrency")
    # one device holds both layers: (400e12 - 330e12 - 1 - activations) // (2 x 8 B) live requests,
    # far above the limit; the search stopped at 1e9 and says so; the bound is the large layer's
    # own ceiling on a device, (400e12 - 330e12 - activations) // 8, not met, so not proven
    act = doc["stages"][0]["bytes"]["activations"]
    assert doc["summary"]["devices_used"] == 1
    assert level["cap"] == 10**9
    assert level["value"] == (400 * 10**12 - 330 * 10**12 - 1 - act) // 16 > 10**9
    assert level["bound"] == (400 * 10**12 - 330 * 10**12 - act) // 8 and level["proven"] is False
    code, text, err = run_cli(["solve", m, "-H", h, "--concurrency", "0", "--context", "8", "--time-limit", "20"])
    assert code == 0 and "must be between 0 and 1e9" not in err


def test_compare_rows_state_every_level(run_cli, write):
    m, h = write("three.yaml", MODEL), write("pair.yaml", HARDWARE)
    code, out, err = run_cli(["compare", m, "-H", h, "--context", "1k", "--json", "--time-limit", "5", "-q"])
    assert code == 0, err
    rows = {(r["method"], r["mode"]): r for r in json.loads(out)["rows"]}
    exact = [{"name": "devices", "value": 2, "unit": "devices", "bound": 2, "proven": True},
             {"name": "latency", "value": 4.2376, "unit": "us", "bound": 4.2376, "proven": True}]
    assert rows["cpsat", "contiguous"]["levels"] == rows["dp", "contiguous"]["levels"] == exact
    # typepack keeps each attention layer alone: 3 devices against the bound of 2, not proven
    assert rows["typepack", "free"]["levels"] == [{"name": "devices", "value": 3, "unit": "devices", "bound": 2,
                                                    "proven": False}]
    assert rows["bound", "contiguous"]["levels"] == []
