"""Place several models on one fleet with placer's library API, validate and export each.

    python examples/plan_a_fleet.py [PLAN.yaml] [OUT.json]

Default plan: examples/fleet_plans/wafer_fleet.yaml (Kimi K3 with its EAGLE-3 head and two Llama
3.1 70B replicas on WSE-3T wafers). Each model is placed alone first (its proven minimum), then
jointly; the fleet mapping holds every model's pipelines and goes to OUT.json when a path is given.
"""

import json
import sys
from pathlib import Path

from placer import plan_fleet, validate_mapping
from placer.export import export_mapping
from placer.mapping import write_mapping

plan_file = sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent / "fleet_plans" / "wafer_fleet.yaml"
fp = plan_fleet(plan_file)
if not fp.feasible:
    sys.exit(f"no joint plan: {fp.message}")
print(f"{len(fp.models)} models on {fp.fleet.name}: {fp.devices} devices "
      f"(bound {fp.bound:g}, {'proven' if fp.proven else 'not proven'}); each alone: {fp.alone_sum}")
for m in fp.models:
    print(f"  {m.entry.name}: {len(m.replicas)} replica(s) of {', '.join(str(r.devices) for r in m.replicas)} "
          f"device(s); alone {m.fewest} per replica")
doc = fp.mapping
print(f"violations: {len(validate_mapping(doc))}")
manifest = json.loads(export_mapping(doc, "json").text)
print("exported: " + ", ".join(f"{m['name']} x {len(m['pipelines'])}" for m in manifest["models"]))
if len(sys.argv) > 2:
    write_mapping(sys.argv[2], doc)
    print(f"mapping written to {sys.argv[2]}")
