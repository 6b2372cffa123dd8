"""Pictures of placements and sweeps; one ``plot_*`` function per module, each drawing on an optional ``ax``.

Importing this package selects matplotlib's non-interactive Agg backend unless another backend is
already in use, so plots work on machines without a display.
"""

from __future__ import annotations

import matplotlib

if matplotlib.get_backend().lower() not in ("agg", "pdf", "svg", "ps", "cairo", "module://matplotlib_inline.backend_inline"):
    matplotlib.use("Agg")

import os  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

from placer.plotting.plot_frontier import plot_frontier  # noqa: E402
from placer.plotting.plot_frontiers import plot_frontiers  # noqa: E402
from placer.plotting.plot_gantt import plot_gantt  # noqa: E402
from placer.plotting.plot_layout import plot_layout  # noqa: E402
from placer.plotting.plot_speed_frontier import plot_speed_frontier  # noqa: E402
from placer.plotting.plot_speed_frontiers import plot_speed_frontiers  # noqa: E402

__all__ = ["plot_layout", "plot_frontier", "plot_frontiers", "plot_speed_frontier", "plot_speed_frontiers",
           "plot_gantt", "save", "image_format", "IMAGE_FORMATS"]

IMAGE_FORMATS = ("png", "svg", "pdf", "jpg", "jpeg", "webp", "tif", "tiff", "eps", "ps")


def image_format(path) -> str:
    """The format ``path`` is written in: its suffix, or PNG when it has none. Raises ValueError
    for a suffix that is no image format placer writes."""
    suffix = Path(path).suffix.lower().lstrip(".")
    if not suffix:
        return "png"
    if suffix not in IMAGE_FORMATS:
        raise ValueError(f"unknown image format {Path(path).suffix!r} (use {', '.join(IMAGE_FORMATS[:3])}, ...; "
                         f"no suffix writes PNG)")
    return suffix


def save(fig, path) -> Path:
    """Write ``fig`` to exactly ``path`` (format from the suffix; PNG without one), atomically, and
    close it. Returns the path written."""
    import matplotlib.pyplot as plt

    path = Path(path)
    fmt = image_format(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fig.savefig(fh, format=fmt, dpi=fig.dpi, bbox_inches="tight")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    finally:
        plt.close(fig)
    return path
