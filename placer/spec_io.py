"""Reading spec files safely: size limit, UTF-8, YAML ``safe_load``, one-line errors.

Shared by the model, hardware, workload and mapping readers; it knows nothing of their content.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import yaml
from pydantic import ValidationError

from .errors import InvalidSpec

__all__ = ["read_text", "load_yaml_or_json", "sha256_text", "pydantic_error", "atomic_write_text"]

MAX_SPEC_BYTES = 8 * 2**20


def read_text(path: str | os.PathLike) -> str:
    """Text of ``path``; refuses missing, oversized and non-UTF-8 files with an :class:`InvalidSpec`."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_SPEC_BYTES:
            raise InvalidSpec(str(p), "-", f"file is {size} bytes; spec files are limited to {MAX_SPEC_BYTES}")
        data = p.read_bytes()
    except FileNotFoundError:
        raise InvalidSpec(str(p), "-", "file not found") from None
    except IsADirectoryError:
        raise InvalidSpec(str(p), "-", "is a directory, not a file") from None
    except OSError as exc:
        raise InvalidSpec(str(p), "-", f"cannot read file: {exc.strerror}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidSpec(str(p), "-", f"not UTF-8 text (byte {exc.start})") from None


def load_yaml_or_json(path: str | os.PathLike) -> tuple[dict, str]:
    """Parse ``path`` (YAML via ``safe_load``, JSON is YAML too) into a mapping; returns (data, text)."""
    text = read_text(path)
    try:
        if str(path).endswith(".json"):
            data = json.loads(text, parse_constant=_reject_constant)
        else:
            data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "-"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InvalidSpec(str(path), where, f"invalid YAML: {problem}") from None
    except (json.JSONDecodeError, ValueError) as exc:
        raise InvalidSpec(str(path), "-", f"invalid JSON: {exc}") from None
    except RecursionError:
        raise InvalidSpec(str(path), "-", "document nested too deeply") from None
    if not isinstance(data, dict):
        raise InvalidSpec(str(path), "-", f"expected a mapping at the top level, got {type(data).__name__}")
    return data, text


def _reject_constant(name: str):
    raise ValueError(f"{name} is not allowed")


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def pydantic_error(source: str, exc: ValidationError, prefix: str = "") -> InvalidSpec:
    """The first pydantic error as an :class:`InvalidSpec` naming the dotted field path."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err.get("loc", ()) if not str(p).startswith("function-"))
    field = ".".join(x for x in (prefix, loc) if x) or "-"
    msg = err.get("msg", "invalid value")
    if err.get("type") == "extra_forbidden":
        msg = "unknown field"
    elif err.get("type") == "missing":
        msg = "required field is missing"
    msg = msg.removeprefix("Value error, ")
    return InvalidSpec(source, field, msg)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` atomically: a temporary file in the same folder, fsync, rename."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
