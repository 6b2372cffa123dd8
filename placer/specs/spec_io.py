"""Reading spec files safely: size limit, UTF-8, YAML ``safe_load``, one-line errors.

Shared by the model, hardware, workload and mapping readers; it knows nothing of their content.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Annotated

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from placer.specs.errors import InvalidSpec

__all__ = ["StrictSpec", "SpecName", "read_text", "load_yaml_or_json", "load_json", "parse_json", "sha256_text", "pydantic_error", "atomic_write_text", "reject_bool",
           "spec_sha256"]

MAX_SPEC_BYTES = 8 * 2**20


class StrictSpec(BaseModel):
    """A section of a spec: unknown keys are refused, and the values are frozen once read."""

    model_config = ConfigDict(extra="forbid", frozen=True)


# a spec's name: what catalog references, file names and mappings use
SpecName = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._+-]+$")]


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


class _SafeUniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key given twice in one mapping.

    A half-edited spec with ``memory:`` written twice would otherwise silently keep the last value.
    """


def _construct_unique_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False):
    seen: set = set()
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = (key_node.tag, key_node.value)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark,
                f"duplicate key {key_node.value!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_SafeUniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_unique_mapping)


def _unique_json_object(pairs: list[tuple[str, object]]) -> dict:
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def parse_json(text: str, source: str, *, constants: bool = False):
    """``text`` parsed as JSON; keys given twice in one object, and (unless ``constants``) JSON's
    ``NaN``/``Infinity`` constants, are refused, like malformed or too deeply nested text, with an
    :class:`InvalidSpec` naming ``source``."""
    hooks = {} if constants else {"parse_constant": _reject_constant}
    try:
        return json.loads(text, object_pairs_hook=_unique_json_object, **hooks)
    except ValueError as exc:   # json.JSONDecodeError is a ValueError
        raise InvalidSpec(source, None, f"invalid JSON: {exc}") from None
    except RecursionError:
        raise InvalidSpec(source, None, "document nested too deeply") from None


def load_json(path: str | os.PathLike, *, constants: bool = False) -> tuple[dict, str]:
    """Parse ``path`` as JSON (:func:`parse_json`) into a mapping; returns (data, text)."""
    text = read_text(path)
    return _mapping(parse_json(text, str(path), constants=constants), path), text


def load_yaml_or_json(path: str | os.PathLike) -> tuple[dict, str]:
    """Parse ``path`` (YAML via a safe loader; JSON, by its name, with :func:`load_json`) into a
    mapping; returns (data, text).

    Keys given twice in one mapping, and JSON's ``NaN``/``Infinity`` constants, are refused.
    """
    if str(path).endswith(".json"):
        return load_json(path)
    text = read_text(path)
    try:
        data = yaml.load(text, Loader=_SafeUniqueKeyLoader)  # a SafeLoader: no object construction
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "-"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InvalidSpec(str(path), where, f"invalid YAML: {problem}") from None
    except ValueError as exc:   # a scalar YAML resolves but Python cannot build (a date out of range)
        raise InvalidSpec(str(path), "-", f"invalid YAML: {exc}") from None
    except RecursionError:
        raise InvalidSpec(str(path), "-", "document nested too deeply") from None
    return _mapping(data, path), text


def _mapping(data, path) -> dict:
    """``data`` when it is a mapping of at most :data:`MAX_SPEC_VALUES` values (aliases expanded)."""
    if not isinstance(data, dict):
        raise InvalidSpec(str(path), "-", f"expected a mapping at the top level, got {type(data).__name__}")
    values = expanded_size(data)
    if values > MAX_SPEC_VALUES:
        raise InvalidSpec(str(path), "-", f"document expands to {values:,} values (YAML aliases?); "
                                          f"specs are limited to {MAX_SPEC_VALUES:,}")
    return data


MAX_SPEC_VALUES = 2_000_000


def expanded_size(data) -> int:
    """Number of values ``data`` holds once YAML aliases are expanded, computed without expanding them.

    A shared sub-document is counted once per reference (its size is memoised by identity), so an
    alias bomb is measured in time linear in its text, not in its expansion.
    """
    memo: dict[int, int] = {}

    def size(x) -> int:
        if not isinstance(x, (dict, list)):
            return 1
        key = id(x)
        if key in memo:
            return memo[key]
        memo[key] = 1  # a cycle (only YAML can build one) counts once
        items = x.values() if isinstance(x, dict) else x
        total = 1 + sum(size(v) for v in items)
        memo[key] = total
        return total

    return size(data)


def _reject_constant(name: str):
    raise ValueError(f"{name} is not allowed")


def reject_bool(value):
    """Pydantic ``BeforeValidator``: a YAML ``yes``/``true`` is not a number (pydantic would read it as 1)."""
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got the boolean {str(value).lower()}")
    return value


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# Fields that document a spec or tune the simulator (its cost constants, the power figures at each
# boundary, the KV tiers below the chip that session runs park in); a mapping stays valid when they change.
_UNHASHED = frozenset({"description", "notes", "source", "perf", "published_total_params", "active_params",
                       "power", "system_power", "devices_per_system", "price", "default_traffic", "tiers"})


def spec_sha256(data: dict) -> str:
    """Content hash of a parsed spec: what placement depends on, independent of comments, layout and
    key order (documentation fields and simulator ``perf`` constants are left out)."""

    def strip(x):
        if isinstance(x, dict):
            return {str(k): strip(v) for k, v in x.items() if k not in _UNHASHED}
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x

    canonical = json.dumps(strip(data), sort_keys=True, separators=(",", ":"), default=str)
    return sha256_text(canonical)


# Location parts pydantic adds for union members and validators (``weight_bytes.int``), not fields.
_UNION_TAG = re.compile(r"(function-\S*|int|str|float|bool|none|constrained-\w+|"
                        r"(list|dict|tuple|set|literal|tagged-union|json-or-python)\[.*\])")


def pydantic_error(source: str, exc: ValidationError, prefix: str = "") -> InvalidSpec:
    """The first pydantic error as an :class:`InvalidSpec` naming the dotted field path."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err.get("loc", ()) if not _UNION_TAG.fullmatch(str(p)))
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
