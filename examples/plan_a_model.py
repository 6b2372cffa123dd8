"""Plan a model on a fleet with placer's library API and write the stage mapping.

    python examples/plan_a_model.py [MODEL] [HARDWARE] [OUT.json]

Defaults: Kimi K3 on WSE-3T wafers, contiguous stages (what a pipeline runtime executes), the
model's default workload (256k context, the concurrency the wafers hold); the mapping goes to
OUT.json only when a path is given.
"""

import sys

from placer import Placement, Requirements, SolverSettings, load_fleet, load_model, plan, workload_for
from placer.mapping import write_mapping

model_name = sys.argv[1] if len(sys.argv) > 1 else "kimi-k3"
hardware = sys.argv[2] if len(sys.argv) > 2 else "wse-3t"
model = load_model(model_name)
fleet = load_fleet(hardware)
workload = workload_for(model)

p = plan(model, fleet, workload, Requirements(placement=Placement(mode="contiguous")), SolverSettings(time_limit=20))
r = p.result
print(f"{model.name} on {fleet.name}: {r.devices_used} devices, {len(p.mapping['stages'])} stages, "
      f"concurrency ceiling {r.concurrency_ceiling}, hop latency {r.hop_latency_us:.1f} us")
for level in r.levels:
    print(f"  {level.name}: {level.value} (bound {level.bound}, {'proven' if level.proven else 'not proven'})")
if len(sys.argv) > 3:
    write_mapping(sys.argv[3], p.mapping)
    print(f"mapping written to {sys.argv[3]}")
