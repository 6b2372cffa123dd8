"""Pictures of placements and sweeps; one ``plot_*`` function per module, each drawing on an optional ``ax``.

Importing this package selects matplotlib's non-interactive Agg backend unless another backend is
already in use, so plots work on machines without a display.
"""

from __future__ import annotations

import matplotlib

if matplotlib.get_backend().lower() not in ("agg", "pdf", "svg", "ps", "cairo", "module://matplotlib_inline.backend_inline"):
    matplotlib.use("Agg")

from .plot_frontier import plot_frontier  # noqa: E402
from .plot_frontiers import plot_frontiers  # noqa: E402
from .plot_layout import plot_layout  # noqa: E402
from .plot_speed_frontier import plot_speed_frontier  # noqa: E402
from .plot_speed_frontiers import plot_speed_frontiers  # noqa: E402

__all__ = ["plot_layout", "plot_frontier", "plot_frontiers", "plot_speed_frontier", "plot_speed_frontiers", "save"]


def save(fig, path) -> None:
    """Write ``fig`` to ``path`` (format from the suffix) and close it."""
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=fig.dpi, bbox_inches="tight")
    plt.close(fig)
