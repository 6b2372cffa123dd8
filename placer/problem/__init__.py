"""The problem the placement methods solve: an instance (a layer graph, a fleet and a workload in
exact bytes), its memory arithmetic, runtime rules, the placement result, per-rank bytes, and the
reductions (tensor parallelism, attention data parallelism, refinement) that turn a served layout
into an instance and a result back into devices."""
