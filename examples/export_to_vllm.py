"""Plan a model for a pipeline runtime and print the launch command the runtime accepts.

    python examples/export_to_vllm.py [MODEL] [HARDWARE] [FORMAT]

FORMAT is vllm (default), sglang, megatron or torch. The mapping is validated against its specs
and the command is parsed back with the runtime's own rules before it is printed.
"""

import sys

from placer import Placement, Requirements, SolverSettings, load_fleet, load_model, plan, workload_for
from placer.export import export_mapping

model_name = sys.argv[1] if len(sys.argv) > 1 else "llama-3.1-70b"
hardware = sys.argv[2] if len(sys.argv) > 2 else "h100"
fmt = sys.argv[3] if len(sys.argv) > 3 else "vllm"
model = load_model(model_name)
fleet = load_fleet(hardware)
p = plan(model, fleet, workload_for(model), Requirements(placement=Placement(mode="contiguous")),
         SolverSettings(time_limit=10))
print(export_mapping(p.mapping, fmt, model=model, fleet=fleet).text)
