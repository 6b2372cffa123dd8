"""Planning: the one entry point (placer.plan) and the searches built on it."""
