"""Where the shipped catalogs live and how names resolve to files."""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from placer.specs.errors import InvalidSpec

__all__ = ["project_root", "models_dir", "hardware_dir", "resolve_model", "resolve_hardware",
           "list_models", "list_hardware", "catalog_names"]


def project_root() -> Path:
    env = os.environ.get("PLACER_HOME")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2]


def models_dir() -> Path:
    return project_root() / "models"


def hardware_dir() -> Path:
    return project_root() / "hardware"


def catalog_names(folder: Path) -> list[str]:
    """The names a catalog folder offers (its spec files' stems), sorted."""
    return sorted({x.stem for suffix in ("*.yaml", "*.yml") for x in folder.glob(suffix)})


def _resolve(ref: str | os.PathLike, folder: Path, what: str) -> Path:
    """A spec file path as given, or a catalog name matched without regard to case; an unknown
    name is refused with the nearest catalog names (difflib) and the whole catalog."""
    p = Path(ref)
    if p.suffix in (".yaml", ".yml", ".json") or p.exists() or os.sep in str(ref):
        if not p.exists():
            raise InvalidSpec(str(p), None, "file not found")
        return p
    names = catalog_names(folder)
    by_folded = {n.casefold(): n for n in names}
    name = by_folded.get(str(ref).casefold())
    if name is not None:
        for suffix in (".yaml", ".yml"):
            candidate = folder / f"{name}{suffix}"
            if candidate.exists():
                return candidate
    near = difflib.get_close_matches(str(ref).casefold(), list(by_folded), n=3, cutoff=0.5)
    near = [by_folded[n] for n in near]
    hint = f"; did you mean {', '.join(near[:-1]) + ' or ' if len(near) > 1 else ''}{near[-1]}?" if near else ""
    raise InvalidSpec(str(ref), what, f"no {what} of that name in the catalog{hint} "
                                      f"(catalog: {', '.join(names)}; or give a spec file path)")


def resolve_model(ref: str | os.PathLike) -> Path:
    return _resolve(ref, models_dir(), "model")


def resolve_hardware(ref: str | os.PathLike) -> Path:
    return _resolve(ref, hardware_dir(), "hardware")


def list_models() -> list[Path]:
    return sorted(models_dir().glob("*.yaml"))


def list_hardware() -> list[Path]:
    return sorted(hardware_dir().glob("*.yaml"))
