"""The calibration's error bands of a study's rows, as the lines a table prints under it.

Each simulated row carries its run's band (:func:`placer.simulate.error_band.error_band`, the
regime's calibrated error or why it lies outside the calibrated range) in ``error_band``;
:func:`band_lines` says it once when every row shares it, else once per band with the rows it
covers (rows without a simulated speed are left out)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

__all__ = ["band_lines"]


def band_lines(rows: Sequence[dict], label: Callable[[dict], str], key: str = "error_band",
               what: str = "speeds") -> list[str]:
    """``["speeds: <band>"]`` when every row with a band shares it, else ``"speeds of <labels>:
    <band>"`` per band (``label(row)`` names a row; labels said once, in row order)."""
    groups: dict[str, list[str]] = {}
    for r in rows:
        band = r.get(key)
        if band:
            names = groups.setdefault(band, [])
            name = label(r)
            if name not in names:
                names.append(name)
    if len(groups) == 1:
        return [f"{what}: {next(iter(groups))}"]
    return [f"{what} of {', '.join(names)}: {band}" for band, names in groups.items()]
