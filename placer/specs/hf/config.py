"""Reading a Hugging Face ``config.json``: JSON as Python reads it, typed access naming every key.

``Infinity`` / ``NaN`` are valid in Python's ``json`` (and appear in published configs, e.g. a
``time_step_limit`` of ``[0.0, Infinity]``); they are accepted anywhere, and every size placer
uses is validated where it is read: an integer in range, or the error names the dotted key.
"""

from __future__ import annotations

from pathlib import Path

from placer.specs.errors import InvalidSpec
from placer.specs.spec_io import load_json

__all__ = ["Config", "load_config_json", "REQUIRED"]

REQUIRED = object()
_MAX = 10**12  # no real dimension comes near; anything above is a typo


def load_config_json(path: str | Path) -> dict:
    """The mapping in ``path``, parsed as Python's ``json`` does (``NaN`` / ``Infinity`` accepted);
    duplicate keys, non-objects and oversized documents are refused with an :class:`InvalidSpec`."""
    return load_json(path, constants=True)[0]


class Config:
    """Typed access to a config mapping; every failure names the dotted key."""

    def __init__(self, data: dict, source: str, prefix: str = ""):
        self.data = data
        self.source = source
        self.prefix = prefix

    def key(self, key: str) -> str:
        return f"{self.prefix}{key}"

    def fail(self, key: str, message: str) -> InvalidSpec:
        return InvalidSpec(self.source, self.key(key), message)

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def first(self, *keys: str) -> str | None:
        """The first of ``keys`` present with a value (the spellings of one quantity)."""
        return next((k for k in keys if self.data.get(k) is not None), None)

    def _raw(self, key: str, default):
        value = self.data.get(key)
        if value is None:
            if default is REQUIRED:
                raise self.fail(key, "required key is missing" if key not in self.data else "must not be null")
            return default
        return value

    def integer(self, key: str, default=REQUIRED, *, minimum: int = 1):
        value = self._raw(key, default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"expected an integer, got {type(value).__name__} {value!r}")
        if not minimum <= value <= _MAX:
            raise self.fail(key, f"must be between {minimum} and {_MAX}, got {value}")
        return value

    def any_integer(self, keys: tuple[str, ...], default=REQUIRED, *, minimum: int = 1):
        """The integer under the first spelling present; a missing one names every spelling."""
        k = self.first(*keys)
        if k is None:
            if default is REQUIRED:
                raise self.fail(keys[0], "required key is missing" + (
                    f" (also looked for {', '.join(keys[1:])})" if len(keys) > 1 else ""))
            return default
        return self.integer(k, minimum=minimum)

    def flag(self, key: str, default=REQUIRED) -> bool:
        value = self._raw(key, default)
        if not isinstance(value, bool):
            raise self.fail(key, f"expected true or false, got {type(value).__name__} {value!r}")
        return value

    def text(self, key: str, default=REQUIRED):
        value = self._raw(key, default)
        if value is not None and not isinstance(value, str):
            raise self.fail(key, f"expected a string, got {type(value).__name__} {value!r}")
        return value

    def ints(self, key: str, default=REQUIRED, *, minimum: int = 0) -> list[int]:
        value = self._raw(key, default)
        if not isinstance(value, list):
            raise self.fail(key, f"expected a list of integers, got {type(value).__name__}")
        out = []
        for i, x in enumerate(value):
            if isinstance(x, bool) or not isinstance(x, int) or not minimum <= x <= _MAX:
                raise self.fail(f"{key}.{i}", f"expected an integer >= {minimum}, got {x!r}")
            out.append(x)
        return out

    def texts(self, key: str, length: int | None = None, extra: int = 0) -> list[str]:
        """A list of strings, one per decoder layer when ``length`` is given; with ``extra``, the list may
        also carry that many entries after them (MTP layers listed beside the decoder's), left out."""
        value = self._raw(key, REQUIRED)
        if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
            raise self.fail(key, "expected a list of strings")
        if length is not None and extra and len(value) == length + extra:
            return value[:length]
        if length is not None and len(value) != length:
            raise self.fail(key, f"has {len(value)} entries but num_hidden_layers is {length}")
        return value

    def section(self, key: str) -> Config:
        value = self._raw(key, REQUIRED)
        if not isinstance(value, dict):
            raise self.fail(key, f"expected a mapping, got {type(value).__name__}")
        return Config(value, self.source, prefix=f"{self.key(key)}.")

    def sub(self, data: dict, key: str) -> Config:
        return Config(data, self.source, prefix=f"{self.key(key)}.")
