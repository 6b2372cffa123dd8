"""Plan for a per-user speed: the fewest GPUs serving C live requests at X tokens/s each.

    python examples/speed_floor.py [MIN_TOKENS_PER_S] [CONCURRENCY]

Llama 3.1 70B on H100 nodes at 8k context: every layout the model and the nodes allow (each
tensor-parallel degree) is placed, each placement's per-user speed simulated, and replicas added
until the floor holds for every live request.
"""

import sys

from placer import (
    Placement,
    Requirements,
    SolverSettings,
    Targets,
    load_fleet,
    load_model,
    plan,
    workload_for,
)

floor = float(sys.argv[1]) if len(sys.argv) > 1 else 20.0
concurrency = int(sys.argv[2]) if len(sys.argv) > 2 else 16
model = load_model("llama-3.1-70b")
workload = workload_for(model).replace(context_tokens=8192, concurrency=concurrency)
p = plan(model, load_fleet("h100"), workload,
         Requirements(placement=Placement(constraints=()), targets=Targets(min_user_tps=floor)),
         SolverSettings(method="dp", time_limit=10))
print(p.message)
if p.feasible:
    print(f"{p.devices} GPUs: {p.replicas} replica(s) of {p.result.devices_used}, {p.load_per_replica} live "
          f"requests each, {p.simulation.per_user_tokens_per_s:.1f} tokens/s per user (floor {floor:g})")
