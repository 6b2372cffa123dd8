"""Where the shipped catalogs live and how names resolve to files."""

from __future__ import annotations

import os
from pathlib import Path

from .errors import InvalidSpec

__all__ = ["project_root", "models_dir", "hardware_dir", "resolve_model", "resolve_hardware",
           "list_models", "list_hardware"]


def project_root() -> Path:
    env = os.environ.get("PLACER_HOME")
    if env:
        return Path(env)
    return Path(__file__).resolve().parent.parent


def models_dir() -> Path:
    return project_root() / "models"


def hardware_dir() -> Path:
    return project_root() / "hardware"


def _resolve(ref: str | os.PathLike, folder: Path, what: str) -> Path:
    p = Path(ref)
    if p.suffix in (".yaml", ".yml", ".json") or p.exists() or os.sep in str(ref):
        if not p.exists():
            raise InvalidSpec(str(p), "-", "file not found")
        return p
    for suffix in (".yaml", ".yml"):
        candidate = folder / f"{ref}{suffix}"
        if candidate.exists():
            return candidate
    known = ", ".join(sorted(x.stem for x in folder.glob("*.yaml")))
    raise InvalidSpec(str(ref), "-", f"no {what} of that name (catalog: {known})")


def resolve_model(ref: str | os.PathLike) -> Path:
    return _resolve(ref, models_dir(), "model")


def resolve_hardware(ref: str | os.PathLike) -> Path:
    return _resolve(ref, hardware_dir(), "hardware")


def list_models() -> list[Path]:
    return sorted(models_dir().glob("*.yaml"))


def list_hardware() -> list[Path]:
    return sorted(hardware_dir().glob("*.yaml"))
