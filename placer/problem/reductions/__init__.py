"""Reductions from a served layout to a plain placement instance, each beside its inverse:
tensor parallelism (groups of devices as one), attention data parallelism (requests split over a
group), refinement (finer layer graphs for split mode)."""
