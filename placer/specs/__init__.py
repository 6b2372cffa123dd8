"""Specs: what the user states. The model as a layer graph (YAML or a Hugging Face config.json, in
exact bytes at stored precision), the fleet as a capacity graph, the workload, the runtime's
reserve, speculation, the shipped catalogs, units and safe spec reading. Nothing here imports
another placer layer."""
