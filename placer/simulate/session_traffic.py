"""Session traffic: sessions that arrive and run a sequence of turns whose context grows.

A session is one agent's (or one person's) conversation with the server. Its first turn sends
``first_input`` tokens (system prompt, tools, task); every later turn adds ``turn_input`` tokens (tool
output, the user's text) to everything before it and generates ``turn_output`` tokens; between two
turns the session is idle for a think time (a tool running, a test suite, a person reading):
``think_s`` seconds, fixed or lognormal with ``think_sigma``. A session ends after ``turns`` turns
or when its next turn would pass ``context_limit`` tokens. So a session's KV grows turn by turn and
its need for memory is a function of time.

Sessions arrive as a Poisson stream of ``rate`` per second (``total`` sessions in all) or, with
``count``, ``count`` sessions start within the first think time and each ended session is replaced
by a new one until ``total`` have started (a closed loop of sessions, as a fleet's steady state).

:data:`PRESETS` gives the common shapes with their sources (``shared/reference/fleet_facts.md``
section 4b); :func:`read_session_trace` reads the GitHub Copilot coding-agent trace format
(section 4a): gzip or plain JSONL, one session per line.
"""

from __future__ import annotations

import gzip
import json
import math
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

import numpy as np

from placer.specs.errors import ARGUMENT, InvalidSpec

__all__ = ["SessionShape", "Sessions", "SessionTrace", "TurnSpec", "PRESETS", "read_session_trace", "parse_sessions"]


@dataclass(frozen=True)
class TurnSpec:
    """One turn as the server sees it: the whole ``prompt`` (the session's context so far plus the
    turn's new input), the ``output`` tokens and the idle ``think_s`` seconds before it."""

    prompt: int
    output: int
    think_s: float = 0.0


@dataclass(frozen=True)
class SessionShape:
    """A session's turns (see the module docstring); ``source``: where the figures come from."""

    name: str
    first_input: int
    turn_input: int
    turn_output: int
    turns: int
    think_s: float
    think_sigma: float = 0.0
    context_limit: int | None = None
    source: str = ""

    def turns_of(self, rng: np.random.Generator, limit: int | None = None) -> tuple[TurnSpec, ...]:
        """One session's turns, its think times drawn from ``rng``; it stops before a turn whose
        prompt and output pass the smaller of ``limit`` and :attr:`context_limit`."""
        caps = [x for x in (limit, self.context_limit) if x is not None]
        cap = min(caps) if caps else None
        out: list[TurnSpec] = []
        context = 0
        for k in range(self.turns):
            prompt = context + (self.first_input if k == 0 else self.turn_input)
            if cap is not None and prompt + self.turn_output > cap:
                break
            think = 0.0 if k == 0 else self.think_s * (math.exp(self.think_sigma * rng.standard_normal())
                                                       if self.think_sigma else 1.0)
            out.append(TurnSpec(prompt, self.turn_output, think))
            context = prompt + self.turn_output
        return tuple(out)

    def final_context(self) -> int:
        """Tokens of a session that runs all its turns (before any limit)."""
        return self.first_input + (self.turns - 1) * self.turn_input + self.turns * self.turn_output

    def describe(self) -> str:
        think = f"{self.think_s:g} s" + (f" (lognormal, sigma {self.think_sigma:g})" if self.think_sigma else "")
        return (f"{self.name}: {self.turns} turns, {self.first_input:,} input tokens then {self.turn_input:,} per turn, "
                f"{self.turn_output:,} output tokens per turn, {think} between turns, up to "
                f"{self.final_context():,} tokens")


# Shapes with their sources (fleet_facts.md section 4b; U: assumed where nothing is published).
PRESETS: dict[str, SessionShape] = {
    # GitHub Copilot coding agent (Azure public dataset card, 301,026 sessions): 30.9 LLM calls per
    # session, 67.8k prompt and 527 completion tokens per call on average (D). One turn here is one
    # LLM call; prompts growing linearly over 31 calls from a 20k start (U: system prompt, tools and
    # task) average 67.8k with 2,660 new tokens per call (D: 20k + 15 x (2,660 + 527) = 67.8k). Tool
    # time between calls: in the trace, not summarised: 5 s lognormal, sigma 1 (U).
    "coding-agent": SessionShape("coding-agent", 20_000, 2_660, 527, 31, 5.0, 1.0, None,
                                 "GitHub Copilot coding-agent dataset card (31 calls/session, 67.8k prompt, "
                                 "527 completion per call: D); 20k first prompt and 5 s tool time: U"),
    # Open Deep Research in TRT-LLM's agentic replay: ISL 6.2k, OSL 632 per request (V). Turns per
    # session not published: 10 (U), a 2k start and 300 new tokens per turn average 6.2k (D);
    # 20 s of web fetches between turns (U).
    "deep-research": SessionShape("deep-research", 2_000, 300, 632, 10, 20.0, 1.0, None,
                                  "TRT-LLM agentic replay, Open Deep Research ISL 6.2k / OSL 632 (V); "
                                  "10 turns, 2k start, 20 s between turns: U"),
    # Chat: no public per-session statistics in the project's reference: 4 turns of 200 user tokens
    # after a 1k system prompt, 400 output tokens, 30 s reading and typing between turns (all U).
    "chat": SessionShape("chat", 1_000, 200, 400, 4, 30.0, 0.5, None, "assumed (U): no public session statistics"),
    # The agent: sessions growing to 1M tokens over 40 turns (a 24.4k start, 24.4k of tool
    # output per turn, 600 output tokens: 24.4k + 39 x 25k + 600 = 1M), 30 s of tool time between
    # turns (all stated, U).
    "agent-1m": SessionShape("agent-1m", 24_400, 24_400, 600, 40, 30.0, 0.0, None,
                             "stated workload (U): ~1M tokens over 40 turns, 30 s tool time"),
}


@dataclass(frozen=True)
class SessionTrace:
    """Sessions read from a file: each (arrival seconds from the first, its turns)."""

    sessions: tuple[tuple[float, tuple[TurnSpec, ...]], ...]
    source: str

    def describe(self) -> str:
        turns = sum(len(t) for _a, t in self.sessions)
        return f"session trace {Path(self.source).name} ({len(self.sessions):,} sessions, {turns:,} turns)"


@dataclass(frozen=True)
class Sessions:
    """Session traffic: a ``shape`` (a preset or its own) or a ``trace``; arrivals at ``rate``
    sessions/s or a closed loop of ``count`` sessions; ``total`` sessions started in all (default:
    ``count``, or 100 at a rate; a trace's own); ``duration_s`` stops the run early."""

    shape: SessionShape | None = None
    trace: SessionTrace | None = None
    rate: float | None = None
    count: int | None = None
    total: int | None = None
    duration_s: float | None = None

    def __post_init__(self):
        if (self.shape is None) == (self.trace is None):
            raise InvalidSpec(ARGUMENT, "sessions", "give a session shape (a preset) or a session trace")
        if self.rate is not None and self.count is not None:
            raise InvalidSpec(ARGUMENT, "session_rate", "give a session rate or a session count, not both")
        if self.rate is not None and not self.rate > 0:
            raise InvalidSpec(ARGUMENT, "session_rate", "must be a positive number of sessions per second")
        for name in ("count", "total"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise InvalidSpec(ARGUMENT, f"session_{name}", "must be at least 1")

    @property
    def started(self) -> int:
        """Sessions the run starts."""
        if self.total is not None:
            return self.total
        if self.trace is not None and self.rate is None and self.count is None:
            return len(self.trace.sessions)
        return self.count if self.count is not None else 100

    def describe(self) -> str:
        what = self.shape.describe() if self.shape is not None else self.trace.describe()
        if self.count is not None:
            head = f"closed loop of {self.count:,} sessions ({self.started:,} started)"
        elif self.rate is not None:
            head = f"Poisson session arrivals at {self.rate:g}/s ({self.started:,} sessions)"
        else:
            head = f"sessions at the trace's own times ({self.started:,})"
        return f"sessions: {head}, {what}" + (f", for at most {self.duration_s:g} s" if self.duration_s else "")

    def with_load(self, count: int | None = None, rate: float | None = None) -> Sessions:
        return replace(self, count=count, rate=rate, total=None if count is not None else self.total)


def parse_sessions(value: str) -> SessionShape | SessionTrace:
    """``--sessions``: a preset name (:data:`PRESETS`) or a session-trace file."""
    text = str(value).strip()
    if text in PRESETS:
        return PRESETS[text]
    if Path(text).is_file():
        return read_session_trace(text)
    raise InvalidSpec(ARGUMENT, "sessions", f"{value!r}: a preset ({', '.join(PRESETS)}) or a session-trace file")


def _time_s(value, where: str, field: str) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value) / 1000.0            # milliseconds since the epoch
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            pass
    raise InvalidSpec(where, field, f"{value!r}: an ISO 8601 time or milliseconds since the epoch")


def _int(doc: dict, key: str, where: str, field: str) -> int:
    v = doc.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise InvalidSpec(where, field, f"{v!r}: a whole number of tokens >= 0")
    return v


def _session(doc, where: str, line: int) -> tuple[float, tuple[TurnSpec, ...]]:
    """One Copilot-format session: its LLM calls in time order as turns, the idle time before each
    the gap from the previous call's end (its timestamp plus duration_ms) to its start."""
    if not isinstance(doc, dict) or not isinstance(doc.get("turns"), list):
        raise InvalidSpec(where, f"line {line}: turns", "a session object with a list of turns")
    calls = []
    for ti, turn in enumerate(doc["turns"]):
        for ci, call in enumerate((turn or {}).get("llm_calls") or []):
            f = f"line {line}: turns.{ti}.llm_calls.{ci}"
            tokens = call.get("tokens") if isinstance(call, dict) else None
            if not isinstance(tokens, dict):
                raise InvalidSpec(where, f"{f}.tokens", "an object of prompt, completion and cached tokens")
            start = _time_s(call.get("timestamp"), where, f"{f}.timestamp")
            dur = call.get("duration_ms", 0)
            if isinstance(dur, bool) or not isinstance(dur, (int, float)) or dur < 0:
                raise InvalidSpec(where, f"{f}.duration_ms", f"{dur!r}: milliseconds >= 0")
            calls.append((start, start + dur / 1000.0, max(1, _int(tokens, "prompt", where, f"{f}.tokens.prompt")),
                          max(1, _int(tokens, "completion", where, f"{f}.tokens.completion"))))
    if not calls:
        raise InvalidSpec(where, f"line {line}: turns", "a session with no LLM calls")
    calls.sort()
    turns, end = [], calls[0][0]
    for start, stop, prompt, out in calls:
        turns.append(TurnSpec(prompt, out, max(0.0, start - end)))
        end = stop
    return calls[0][0], tuple(turns)


def read_session_trace(path: str | Path) -> SessionTrace:
    """Sessions in the GitHub Copilot coding-agent format (``Azure/AzurePublicDataset``,
    ``GitHubCopilotCodingAgentDataset2026.md``): one session a line, ``session_id``, ``date`` and
    ``turns``, each turn's ``llm_calls`` with ``timestamp``, ``duration_ms`` and ``tokens``
    (``prompt``, ``completion``, ``cached``); gzip (``.gz``) or plain. Sessions in order of their
    first call, arrivals in seconds from the first session's."""
    p = Path(path)
    if not p.is_file():
        raise InvalidSpec(str(p), "sessions", "no such file")
    opener = gzip.open if p.suffix == ".gz" else open
    try:
        with opener(p, "rt", encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidSpec(str(p), "sessions", f"cannot read: {exc}") from None
    sessions = []
    for i, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidSpec(str(p), f"line {i}", f"not JSON: {exc.msg}") from None
        sessions.append(_session(doc, str(p), i))
    if not sessions:
        raise InvalidSpec(str(p), "sessions", "no sessions in the file")
    sessions.sort(key=lambda s: s[0])
    t0 = sessions[0][0]
    return SessionTrace(tuple((a - t0, turns) for a, turns in sessions), str(p))
