"""Spec hashing and atomic writes."""

from __future__ import annotations

import pytest

from placer.specs.fleet import load_fleet
from placer.specs.spec_io import atomic_write_text, spec_sha256

HW = """\
name: tiny
device: {memory: 10 GB, perf: {fixed_overhead_us_per_layer: 1.0}}
fleet: {racks: 2, per_rack: 2}
"""


def test_hash_ignores_comments_layout_and_simulator_constants(tmp_path):
    a = tmp_path / "a.yaml"
    a.write_text(HW)
    b = tmp_path / "b.yaml"
    b.write_text("# a comment\n" + HW.replace("fixed_overhead_us_per_layer: 1.0", "fixed_overhead_us_per_layer: 9.0")
                 .replace("{racks: 2, per_rack: 2}", "\n  racks: 2\n  per_rack: 2"))
    assert load_fleet(a).sha256 == load_fleet(b).sha256


def test_hash_changes_with_capacity(tmp_path):
    a = tmp_path / "a.yaml"
    a.write_text(HW)
    b = tmp_path / "b.yaml"
    b.write_text(HW.replace("10 GB", "11 GB"))
    assert load_fleet(a).sha256 != load_fleet(b).sha256


def test_hash_is_order_independent():
    assert spec_sha256({"a": 1, "b": [1, 2]}) == spec_sha256({"b": [1, 2], "a": 1})
    assert spec_sha256({"a": 1, "b": [1, 2]}) != spec_sha256({"a": 1, "b": [2, 1]})


def test_atomic_write_keeps_old_file_on_failure(tmp_path, monkeypatch):
    target = tmp_path / "m.json"
    atomic_write_text(target, "old")
    import placer.specs.spec_io as sio

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(sio.os, "replace", boom)
    with pytest.raises(OSError):
        atomic_write_text(target, "new")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["m.json"]


def test_active_params_override_is_checked_and_unhashed(tmp_path):
    from placer.specs.errors import InvalidSpec
    from placer.specs.model import model_from_dict

    base = {"name": "m", "hidden_size": 8, "pattern": "K*2",
            "mixers": {"k": {"type": "kda", "num_heads": 1, "head_dim": 8}},
            "layer_types": {"K": {"mixer": "k", "params": 1000, "active_params": 30}}}
    m = model_from_dict(base)
    assert [x.active_params for x in m.layers] == [30, 30]
    assert [x.params for x in m.layers] == [1000, 1000]
    bad = {**base, "layer_types": {"K": {"mixer": "k", "params": 10, "active_params": 30}}}
    with pytest.raises(InvalidSpec, match="active_params 30 exceeds params 10"):
        model_from_dict(bad, source="x.yaml")
    other = {**base, "layer_types": {"K": {"mixer": "k", "params": 1000, "active_params": 999}}}
    assert spec_sha256(base) == spec_sha256(other)


def test_alias_bomb_is_measured_without_expanding(tmp_path):
    from placer.specs.errors import InvalidSpec
    from placer.specs.spec_io import expanded_size, load_yaml_or_json

    shared = [1, 2, 3]
    assert expanded_size({"a": shared, "b": shared}) == 1 + 2 * 4
    lines = ["name: bomb", "l0: &l0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    for i in range(1, 9):
        lines.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]")
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InvalidSpec, match="expands to"):
        load_yaml_or_json(path)
