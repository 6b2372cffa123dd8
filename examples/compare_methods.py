"""Compare the heuristics people use with placer's exact methods on one model.

    python examples/compare_methods.py [MODEL] [HARDWARE]

Each row is one method in one mode: devices used, the proven lower bound and whether the count is
proven optimal. The published rule (typepack) counts devices by layer type and ignores the order
a token visits them; contiguous stages are what pipeline runtimes execute.
"""

import sys

from placer import load_fleet, load_model, workload_for
from placer.planning import Requirements, SolverSettings
from placer.planning.studies.compare import compare

model_name = sys.argv[1] if len(sys.argv) > 1 else "kimi-k3"
hardware = sys.argv[2] if len(sys.argv) > 2 else "wse-3t"
model = load_model(model_name)
rows = [("typepack", "free"), ("ffd", "free"), ("greedy", "contiguous"), ("dp", "contiguous"),
        ("cpsat", "contiguous")]
doc = compare(model, load_fleet(hardware), workload_for(model), Requirements(),
              SolverSettings(time_limit=10, threads=2), rows=rows)
print(f"{'method':<10} {'mode':<11} {'devices':>7} {'bound':>6}  proven")
for row in doc["rows"]:
    print(f"{row['method']:<10} {row['mode']:<11} {row['devices_used']:>7} {row['lower_bound_devices']:>6}  "
          f"{'yes' if row['proven_optimal'] else 'no'}")
