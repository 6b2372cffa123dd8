"""Stored weight formats: exact bytes of one tensor as a checkpoint stores it, scales and zeros included.

A format describes how a linear weight of shape ``(out, in)`` (or a stack ``(E, out, in)``) is kept:
``bits`` per weight, packed; and the metadata a quantized checkpoint stores beside it:

* ``group_size`` g: one scale (``scale_bits``) and, when asymmetric, one zero point
  (``zero_bits``) per g consecutive weights of a row: ``out * ceil(in / g)`` of each;
* ``block`` (r, c): one scale per r x c block (fp8 block quantization): ``ceil(out/r) * ceil(in/c)``;
* ``row_scale_bits``: one scale per output row (per-channel fp8, bitsandbytes int8);
* ``tensor_scale_bits``: bits stored once per tensor (per-tensor fp8 scales, NVFP4's global scale
  and input scale, compressed-tensors' stored shape);
* ``index_bits``: one entry per input column (GPTQ's ``g_idx``);
* ``flat_group``: groups run over the flattened tensor instead of along rows (bitsandbytes 4-bit),
  with ``nested_group`` / ``nested_scale_bits`` for its double-quantized scales.

Every function returns an exact integer of bytes; each stored tensor (packed weights, scales,
zeros) rounds up to whole bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

__all__ = ["WeightFormat", "tensor_bytes", "FORMAT_FIELDS"]


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class WeightFormat:
    bits: int
    group_size: int = 0
    block: tuple[int, int] | None = None
    scale_bits: int = 0
    zero_bits: int = 0
    row_scale_bits: int = 0
    tensor_scale_bits: int = 0
    index_bits: int = 0
    flat_group: bool = False
    nested_group: int = 0
    nested_scale_bits: int = 0

    def __post_init__(self):
        if not 1 <= self.bits <= 64:
            raise ValueError(f"bits must be between 1 and 64, got {self.bits}")
        if self.group_size and self.block:
            raise ValueError("a format has either group_size or block scales, not both")

    @property
    def label(self) -> str:
        """A short human description, e.g. ``4-bit, g32 8-bit scales``."""
        parts = [f"{self.bits}-bit"]
        if self.group_size:
            z = f" + {self.zero_bits}-bit zeros" if self.zero_bits else ""
            parts.append(f"g{self.group_size} {self.scale_bits}-bit scales{z}")
        if self.block:
            parts.append(f"{self.block[0]}x{self.block[1]} block {self.scale_bits}-bit scales")
        if self.row_scale_bits:
            parts.append(f"{self.row_scale_bits}-bit row scales")
        if self.tensor_scale_bits:
            parts.append(f"{self.tensor_scale_bits} bits per tensor")
        return ", ".join(parts)


FORMAT_FIELDS = tuple(WeightFormat.__dataclass_fields__)


def tensor_bytes(shape: tuple[int, ...], fmt: WeightFormat, *, stacked: bool = False) -> int:
    """Bytes of one tensor of ``shape`` in ``fmt``; ``stacked`` means the leading dimension counts
    separate tensors (routed experts), each with its own per-tensor metadata.

    Shapes of one dimension (biases, norms) have one row.
    """
    count = shape[0] if stacked and len(shape) > 1 else 1
    mat = shape[1:] if stacked and len(shape) > 1 else shape
    rows = prod(mat[:-1]) if len(mat) > 1 else 1
    cols = mat[-1]
    numel = rows * cols
    parts = [numel * fmt.bits]                  # each stored tensor rounds up to whole bytes
    if fmt.flat_group and fmt.group_size:
        groups = _ceil(numel, fmt.group_size)
        parts.append(groups * fmt.scale_bits)
        if fmt.nested_group:
            parts.append(_ceil(groups, fmt.nested_group) * fmt.nested_scale_bits)
    elif fmt.group_size:
        groups = rows * _ceil(cols, fmt.group_size)
        parts += [groups * fmt.scale_bits, groups * fmt.zero_bits]
    if fmt.block:
        r, c = fmt.block
        parts.append(_ceil(rows, r) * _ceil(cols, c) * fmt.scale_bits)
    parts += [rows * fmt.row_scale_bits, cols * fmt.index_bits, fmt.tensor_scale_bits]
    return count * sum(_ceil(b, 8) for b in parts)
