"""Stored weight formats: bytes of one tensor, checked against hand counts of what checkpoints store."""

from __future__ import annotations

import pytest

from placer.specs.precision import WeightFormat, tensor_bytes


def test_plain_dtype():
    assert tensor_bytes((7168, 2048), WeightFormat(bits=16)) == 7168 * 2048 * 2
    assert tensor_bytes((3,), WeightFormat(bits=4)) == 2          # 12 bits round up to 2 bytes


def test_fp8_block_scales_round_up_per_block():
    f = WeightFormat(bits=8, block=(128, 128), scale_bits=32)
    # kv_a_proj_with_mqa of DeepSeek-V3: (576, 7168); ceil(576/128) = 5 block rows, 56 block columns
    assert tensor_bytes((576, 7168), f) == 576 * 7168 + 5 * 56 * 4


def test_group_scales_and_zeros():
    awq = WeightFormat(bits=4, group_size=128, scale_bits=16, zero_bits=4)
    # qweight (in, out/8) int32 + scales (in/128, out) fp16 + qzeros (in/128, out/8) int32
    out, inp = 4096, 11008
    assert tensor_bytes((out, inp), awq) == inp * out // 8 * 4 + (inp // 128) * out * 2 + (inp // 128) * out // 8 * 4
    # a row shorter than one group still has one group
    assert tensor_bytes((2, 100), awq) == 100 + 2 * 2 + 1


def test_stacked_experts_each_carry_their_tensor_scales():
    nvfp4 = WeightFormat(bits=4, group_size=16, scale_bits=8, tensor_scale_bits=64)
    one = 2048 * 7168 // 2 + 2048 * 7168 // 16 + 8
    assert tensor_bytes((2048, 7168), nvfp4) == one
    assert tensor_bytes((4, 2048, 7168), nvfp4, stacked=True) == 4 * one


def test_bitsandbytes_flat_blocks_with_double_quantization():
    f = WeightFormat(bits=4, group_size=64, flat_group=True, scale_bits=8, nested_group=256, nested_scale_bits=32)
    n = 4096 * 4096
    blocks = n // 64
    assert tensor_bytes((4096, 4096), f) == n // 2 + blocks + -(-blocks // 256) * 4


@pytest.mark.parametrize("kw", [dict(bits=0), dict(bits=4, group_size=32, block=(128, 128))])
def test_bad_formats_are_refused(kw):
    with pytest.raises(ValueError):
        WeightFormat(**kw)
