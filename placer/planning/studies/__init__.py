"""Studies built on the planning step: compare (methods and degrees), sweep, frontier, recommend,
serving-mode comparison and explain."""
