"""Exact bytes of a layer under a workload. Shared by the solvers and the independent validator.

Every function returns an exact integer; sub-byte precisions round up per tensor
(``ceil(elements * bits / 8)``), so a 4-bit layer of an odd count still needs whole bytes.
"""

from __future__ import annotations

from placer.specs.model import Layer
from placer.specs.workload import Workload

__all__ = [
    "bits_to_bytes",
    "weight_bytes",
    "kv_bytes_per_token",
    "kv_bytes_per_request",
    "state_bytes_per_request",
    "activation_bytes_per_token",
    "request_bytes",
    "layer_demand_bytes",
    "activation_buffer_bytes",
]


def bits_to_bytes(elements: int, bits: int) -> int:
    """Bytes for ``elements`` values of ``bits`` each, rounded up to a whole byte."""
    return -(-elements * bits // 8)


def weight_bytes(layer: Layer, wl: Workload) -> int:
    """Weight bytes: as the checkpoint stores them when the layer knows its stored formats (scales and
    zeros included) and ``wl.weights_as_stored``; else at ``wl.weight_bits`` (an explicit
    ``--weight-bits`` overrides every stored format). A fixed ``weight_bytes`` is used as given."""
    if layer.weight_bytes_fixed is not None:
        return layer.weight_bytes_fixed
    if layer.weight_groups and wl.weights_as_stored:
        return sum(g.bytes for g in layer.weight_groups)
    b = bits_to_bytes(layer.params, wl.weight_bits)
    if wl.weight_group_size > 0:
        b += bits_to_bytes(-(-layer.params // wl.weight_group_size), wl.weight_scale_bits)
    return b


def kv_bytes_per_token(layer: Layer, wl: Workload) -> int:
    if layer.kv_bytes_per_token_fixed is not None:
        return layer.kv_bytes_per_token_fixed
    return bits_to_bytes(layer.kv_elements_per_token, wl.kv_bits)


def kv_bytes_per_request(layer: Layer, wl: Workload) -> int:
    """KV bytes one request of ``wl.context_tokens`` holds in this layer (a sliding window bounds it)."""
    tokens = wl.context_tokens if layer.kv_window is None else min(wl.context_tokens, layer.kv_window)
    return kv_bytes_per_token(layer, wl) * tokens


def state_bytes_per_request(layer: Layer, wl: Workload) -> int:
    """Recurrent plus short-conv state bytes of one request in this layer (independent of context)."""
    if layer.state_bytes_per_request_fixed is not None:
        return layer.state_bytes_per_request_fixed
    return (bits_to_bytes(layer.state_elements_per_request, wl.state_bits)
            + bits_to_bytes(layer.conv_state_elements_per_request, wl.conv_state_bits))


def activation_bytes_per_token(layer: Layer, wl: Workload) -> int:
    """Bytes of this layer's output for one token (what crosses a hop after it)."""
    return bits_to_bytes(layer.activation_elements_per_token, wl.activation_bits)


def request_bytes(layer: Layer, wl: Workload) -> int:
    """Bytes one live request needs in this layer: KV cache plus state."""
    return kv_bytes_per_request(layer, wl) + state_bytes_per_request(layer, wl)


def layer_demand_bytes(layer: Layer, wl: Workload, concurrency: int | None = None) -> int:
    """Weights plus the reserve for ``concurrency`` (default ``wl.concurrency``) live requests."""
    c = wl.concurrency if concurrency is None else concurrency
    return weight_bytes(layer, wl) + c * request_bytes(layer, wl)


def activation_buffer_bytes(model_layers, wl: Workload) -> int:
    """Per-device activation buffers: one input and one output micro-batch of the widest activation."""
    width = max((activation_bytes_per_token(x, wl) for x in model_layers), default=0)
    return 2 * wl.micro_batch * width
