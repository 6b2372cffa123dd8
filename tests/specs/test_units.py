"""Units on input: exact integers for sizes and token counts, rates in bytes per second."""

from __future__ import annotations

import pytest

from placer.specs.units import (
    format_bytes,
    format_tokens,
    parse_bandwidth,
    parse_bytes,
    parse_flops,
    parse_int_list,
    parse_power,
    parse_tokens,
)


@pytest.mark.parametrize("text, expected", [
    ("44 GB", 44_000_000_000),                 # decimal: 44 x 10^9
    ("44GB", 44_000_000_000),
    ("44 GiB", 44 * 2**30),                    # binary: 44 x 1,073,741,824 = 47,244,640,256
    ("1 KiB", 1024),
    ("1.5 kB", 1500),                          # 1.5 x 1000, whole bytes
    ("2.5 MiB", 2_621_440),                    # 2.5 x 1,048,576
    ("0.5 TB", 500_000_000_000),
    ("576", 576),
    ("1_000 B", 1000),
    (576, 576),
    (1.6e10, 16_000_000_000),                  # a float that is a whole number of bytes
])
def test_parse_bytes_exact(text, expected):
    assert parse_bytes(text) == expected
    assert isinstance(parse_bytes(text), int)


def test_gib_and_gb_differ():
    # 44 GiB - 44 GB = 47,244,640,256 - 44,000,000,000 = 3,244,640,256 bytes
    assert parse_bytes("44 GiB") - parse_bytes("44 GB") == 3_244_640_256


@pytest.mark.parametrize("bad", [
    "44 GBB",          # unit typo
    "44 gb",           # units are case-sensitive: gb is not a byte unit
    "44 G B",
    "-5 GB",           # negative sizes
    -5,
    "0.5 B",           # not a whole number of bytes
    "1.0000000001 kB",
    "nan", "inf", float("nan"), float("inf"), -float("inf"),
    True, False,       # YAML `yes` / `true` must not pass as 1 / 0 bytes
    None, [44], "",
])
def test_parse_bytes_rejects(bad):
    with pytest.raises(ValueError):
        parse_bytes(bad)


def test_unit_typo_message_names_the_unit():
    with pytest.raises(ValueError, match="GBB"):
        parse_bytes("44 GBB")


@pytest.mark.parametrize("text, expected", [
    ("256k", 262_144),          # 256 x 1024
    ("256K", 262_144),
    ("128k", 131_072),
    ("1M", 1_048_576),          # 2^20
    ("1.5k", 1536),             # 1.5 x 1024
    ("32000", 32_000),          # plain integers are taken as written
    (4096, 4096),
])
def test_parse_tokens(text, expected):
    assert parse_tokens(text) == expected


@pytest.mark.parametrize("bad", ["0", 0, "-1k", "1.0001k", "12x", "256 kB", True, float("nan"), "1e400x"])
def test_parse_tokens_rejects(bad):
    with pytest.raises(ValueError):
        parse_tokens(bad)


@pytest.mark.parametrize("text, expected", [
    ("21 PB/s", 2.1e16),        # bytes per second
    ("3.35 TB/s", 3.35e12),
    ("2.4 Tb/s", 3.0e11),       # bits: 2.4e12 / 8
    ("400 Gb/s", 5.0e10),       # 400e9 / 8 = one NDR port, 50 GB/s
    ("400 GB/s", 4.0e11),       # the capital B is 8x the lower-case b
    ("100 Gbps", 1.25e10),
    (1e9, 1e9),
])
def test_parse_bandwidth_bits_vs_bytes(text, expected):
    assert parse_bandwidth(text) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("bad", ["21 PB", "21 PB/z", "21 PB/s/s", "-1 GB/s", -1, -0.5, float("nan"),
                                 float("inf"), "inf B/s", True])
def test_parse_bandwidth_rejects(bad):
    with pytest.raises(ValueError):
        parse_bandwidth(bad)


def test_power_and_flops():
    assert parse_power("25 kW") == 25_000.0
    assert parse_power("700 W") == 700.0
    assert parse_flops("989 TFLOPS") == pytest.approx(9.89e14, rel=1e-12)
    assert parse_flops("2.25 PFLOPS") == pytest.approx(2.25e15, rel=1e-12)
    assert parse_flops("125 PFLOP/s") == pytest.approx(1.25e17, rel=1e-12)
    for bad in ("25 kWh", "-700 W", -700, float("nan"), "700"):
        with pytest.raises(ValueError):
            parse_power(bad)
    for bad in ("989 TOPS", "989 TB/s", -1.0, float("inf")):
        with pytest.raises(ValueError):
            parse_flops(bad)


def test_parse_int_list():
    assert parse_int_list("1,2,4") == [1, 2, 4]
    assert parse_int_list("3..5") == [3, 4, 5]
    # more than 64 values: powers of two from lo, then hi itself
    assert parse_int_list("1..100") == [1, 2, 4, 8, 16, 32, 64, 100]
    assert parse_int_list("1k,2k", parse=parse_tokens) == [1024, 2048]
    for bad in ("5..3", "", ","):
        with pytest.raises(ValueError):
            parse_int_list(bad)


def test_formatting():
    assert format_bytes(16_129_032_258) == "16.13 GB"
    assert format_bytes(576) == "576 B"
    assert format_tokens(262_144) == "256k"
    assert format_tokens(2**20) == "1M"
    assert format_tokens(256_000) == "250k"      # 256,000 = 250 x 1024
    assert format_tokens(1000) == "1000"
    assert parse_bandwidth("0 B/s") == 0.0
