"""Request traces a simulation replays: arrival times and each request's prompt, output and cached
prompt tokens, read from three formats.

* **Mooncake** (``kvcache-ai/Mooncake``, ``FAST25-release/traces/*.jsonl``): one JSON object a line
  with ``timestamp`` (ms from the trace's start), ``input_length``, ``output_length`` and
  ``hash_ids`` (the prompt's blocks of 512 tokens, hashed and remapped; equal ids are equal
  blocks). A request's cached tokens are its leading blocks every one of which an earlier request
  already carried (a prefix cache keyed by block: 512 tokens each, at most the prompt).
* **BurstGPT** (``HPMLL/BurstGPT``, ``data/BurstGPT_*.csv``): the header ``Timestamp, Model,
  Request tokens, Response tokens, Total tokens, Log Type``, ``Timestamp`` in seconds. Rows with 0
  response tokens (failed requests in the published files) are left out; no prefix-cache data.
* **Simple CSV** (this project's): the header ``arrival_s,input_tokens,output_tokens`` and an
  optional ``cached_tokens`` column (prompt tokens found in the prefix cache, default 0).

The published formats as read: ``shared/reference/fleet_facts.md`` section 4a (Mooncake @a2a4b18,
README of 2025-02-21; BurstGPT README @ff1a7c6). Arrival times start at 0 (the first request's).
Malformed input is an :class:`~placer.specs.errors.InvalidSpec` naming the file, the row and the field.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

from placer.specs.errors import InvalidSpec

__all__ = ["Trace", "TraceRow", "read_trace", "MOONCAKE_BLOCK_TOKENS", "FORMATS"]

MOONCAKE_BLOCK_TOKENS = 512
FORMATS = ("mooncake", "burstgpt", "csv")
_BURSTGPT = ("Timestamp", "Request tokens", "Response tokens")
_SIMPLE = ("arrival_s", "input_tokens", "output_tokens")


@dataclass(frozen=True)
class TraceRow:
    arrival_s: float            # seconds after the trace's first request
    input_tokens: int           # the prompt
    output_tokens: int
    cached_tokens: int = 0      # of the prompt, found in the prefix cache


@dataclass(frozen=True)
class Trace:
    """Rows in arrival order, the file they came from and its format (one of :data:`FORMATS`)."""

    rows: tuple[TraceRow, ...]
    source: str
    format: str

    @property
    def span_s(self) -> float:
        return self.rows[-1].arrival_s - self.rows[0].arrival_s

    @property
    def rate(self) -> float | None:
        """Mean arrivals per second over the trace (None for one row or no span)."""
        n = len(self.rows)
        return (n - 1) / self.span_s if n > 1 and self.span_s > 0 else None

    @property
    def longest(self) -> int:
        """The longest request: prompt plus output tokens."""
        return max(r.input_tokens + r.output_tokens for r in self.rows)

    def describe(self) -> str:
        """``trace mooncake.jsonl (mooncake, 40 requests over 12.5 s)``."""
        return (f"trace {Path(self.source).name} ({self.format}, {len(self.rows):,} requests over "
                f"{self.span_s:g} s)")


def read_trace(path: str | Path, fmt: str | None = None) -> Trace:
    """The trace in ``path``: ``fmt`` one of :data:`FORMATS`, else told by the file (``.jsonl``:
    Mooncake; a CSV by its header)."""
    p = Path(path)
    if not p.is_file():
        raise InvalidSpec(str(p), "trace", "no such file")
    text = p.read_text(encoding="utf-8-sig")
    if fmt is None:
        fmt = "mooncake" if p.suffix == ".jsonl" or text.lstrip().startswith("{") else _csv_format(p, text)
    if fmt not in FORMATS:
        raise InvalidSpec(str(p), "trace", f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
    rows = _mooncake(p, text) if fmt == "mooncake" else _csv_rows(p, text, fmt)
    if not rows:
        raise InvalidSpec(str(p), "trace", "no requests in the file")
    rows.sort(key=lambda r: r.arrival_s)
    t0 = rows[0].arrival_s
    rows = [TraceRow(r.arrival_s - t0, r.input_tokens, r.output_tokens, r.cached_tokens) for r in rows]
    return Trace(tuple(rows), str(p), fmt)


def _csv_format(p: Path, text: str) -> str:
    header = [h.strip() for h in next(csv.reader(text.splitlines()[:1]), [])]
    if all(h in header for h in _BURSTGPT):
        return "burstgpt"
    if all(h in header for h in _SIMPLE):
        return "csv"
    raise InvalidSpec(str(p), "trace", "not a trace: a Mooncake .jsonl, a BurstGPT CSV (Timestamp, Request "
                                       "tokens, Response tokens, ...) or arrival_s,input_tokens,output_tokens[,cached_tokens]")


def _count(p: Path, where: str, name: str, value, minimum: int = 0) -> int:
    try:
        n = float(value)
    except (TypeError, ValueError):
        raise InvalidSpec(str(p), f"{where}: {name}", f"{value!r} is not a number") from None
    if n != int(n) or n < minimum:
        raise InvalidSpec(str(p), f"{where}: {name}", f"{value!r} must be a whole number >= {minimum}")
    return int(n)


def _seconds(p: Path, where: str, name: str, value) -> float:
    try:
        t = float(value)
    except (TypeError, ValueError):
        raise InvalidSpec(str(p), f"{where}: {name}", f"{value!r} is not a time") from None
    if not t >= 0:
        raise InvalidSpec(str(p), f"{where}: {name}", f"{value!r} must be >= 0")
    return t


def _mooncake(p: Path, text: str) -> list[TraceRow]:
    seen: set = set()
    rows = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"line {i}"
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidSpec(str(p), where, f"not JSON: {exc.msg}") from None
        if not isinstance(rec, dict):
            raise InvalidSpec(str(p), where, "not a JSON object")
        for name in ("timestamp", "input_length", "output_length"):
            if name not in rec:
                raise InvalidSpec(str(p), f"{where}: {name}", "missing")
        prompt = _count(p, where, "input_length", rec["input_length"], 1)
        hashes = rec.get("hash_ids", [])
        if not isinstance(hashes, list):
            raise InvalidSpec(str(p), f"{where}: hash_ids", "must be a list of block ids")
        hit = 0
        for h in hashes:
            if h not in seen:
                break
            hit += 1
        seen.update(hashes)
        rows.append(TraceRow(_seconds(p, where, "timestamp", rec["timestamp"]) / 1000.0, prompt,
                             _count(p, where, "output_length", rec["output_length"], 1),
                             min(hit * MOONCAKE_BLOCK_TOKENS, prompt)))
    return rows


def _csv_rows(p: Path, text: str, fmt: str) -> list[TraceRow]:
    reader = csv.DictReader(text.splitlines(), skipinitialspace=True)
    names = _BURSTGPT if fmt == "burstgpt" else _SIMPLE
    missing = [n for n in names if n not in (reader.fieldnames or [])]
    if missing:
        raise InvalidSpec(str(p), missing[0], f"missing column (a {fmt} trace has {', '.join(names)})")
    rows = []
    for i, rec in enumerate(reader, 2):
        where = f"row {i}"
        t = _seconds(p, where, names[0], rec[names[0]])
        out = _count(p, where, names[2], rec[names[2]])
        if fmt == "burstgpt":
            if out == 0:        # a failed request
                continue
            rows.append(TraceRow(t, _count(p, where, names[1], rec[names[1]], 1), out))
            continue
        if out < 1:
            raise InvalidSpec(str(p), f"{where}: output_tokens", "must be at least 1")
        prompt = _count(p, where, names[1], rec[names[1]], 1)
        cached = rec.get("cached_tokens")
        cached = 0 if cached in (None, "") else _count(p, where, "cached_tokens", cached)
        if cached > prompt:
            raise InvalidSpec(str(p), f"{where}: cached_tokens", f"{cached} exceeds the prompt's {prompt} tokens")
        rows.append(TraceRow(t, prompt, out, cached))
    return rows
