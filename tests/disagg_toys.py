"""The toy model and fleets of the disaggregated-plan tests (tests/planning/test_disagg.py), shared with
tests/planning/test_frontier_serving.py and tests/export/test_runtime_flags.py."""

from __future__ import annotations

LAYERS = 4
KV_PER_TOKEN = 65536          # bytes per token per layer
MODEL = "name: pdtoy\nlayers:\n" + "".join(
    f"  - {{kind: attention, params: 500000000, kv_bytes_per_token: {KV_PER_TOKEN}}}\n" for _ in range(LAYERS))
MIXED = """name: pdmixed
device_types:
  pgpu: {kind: gpu, memory: 16 GB, memory_bandwidth: 2 TB/s, compute: 400 TFLOPS, power: 500 W,
         perf: {}}
  dgpu: {kind: gpu, memory: 32 GB, memory_bandwidth: 4 TB/s, compute: 200 TFLOPS, power: 800 W,
         perf: {}}
fleet:
  groups:
    - {device: pgpu, racks: 2, per_rack: 2}
    - {device: dgpu, racks: 2, per_rack: 2}
  intra_rack_latency_us: 2
  inter_rack_latency_us: 5
  intra_rack_bandwidth: 400 GB/s
  inter_rack_bandwidth: 100 GB/s
"""
WAFERS = """name: pdwafers
device: {kind: wafer, memory: 12 GB, memory_bandwidth: 20 PB/s, compute: 100 PFLOPS, power: 20 kW,
         perf: {fixed_overhead_us_per_layer: 400}}
fleet: {racks: 2, per_rack: 4, intra_rack_latency_us: 2, inter_rack_latency_us: 4,
        intra_rack_bandwidth: 150 GB/s, inter_rack_bandwidth: 150 GB/s}
"""
GPUS = """name: pdgpus
device: {kind: gpu, memory: 16 GB, memory_bandwidth: 2 TB/s, compute: 400 TFLOPS, power: 500 W,
         perf: {}}
fleet: {racks: 2, per_rack: 4, intra_rack_latency_us: 2, inter_rack_latency_us: 6,
        intra_rack_bandwidth: 400 GB/s, inter_rack_bandwidth: 50 GB/s}
"""
