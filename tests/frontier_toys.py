"""The small hand-made model and the two fleets of the speed-frontier tests
(tests/planning/test_frontier.py), also run through the command line by tests/cli/test_cli_first_hour.py."""

from __future__ import annotations

MODEL = {"name": "small", "layers": [
    {"kind": "attention", "weight_bytes": 3_000_000, "kv_bytes_per_token": 100},
    {"kind": "linear_attention", "weight_bytes": 2_000_000, "state_bytes_per_request": 10_000},
    {"kind": "attention", "weight_bytes": 3_000_000, "kv_bytes_per_token": 100},
    {"kind": "linear_attention", "weight_bytes": 2_000_000, "state_bytes_per_request": 10_000},
]}


def _hw(name, bw, power, overhead):
    return {"name": name, "device": {"memory": "8 MB", "memory_bandwidth": bw, "compute": "100 TFLOPS",
                                     "power": power, "kind": "gpu",
                                     "perf": {"fixed_overhead_us_per_layer": overhead, "bandwidth_efficiency": 0.5,
                                              "compute_efficiency": 0.5}},
            "fleet": {"racks": 2, "per_rack": 4, "intra_rack_latency_us": 2, "inter_rack_latency_us": 4}}


FAST, SLOW = _hw("fast", "10 TB/s", "20 kW", 1.0), _hw("slow", "1 TB/s", "1 kW", 10.0)
