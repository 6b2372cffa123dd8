"""One time budget shared by every phase of a solve, and the Ctrl-C that ends it early.

A :class:`Deadline` is a point on the monotonic clock. The caller that owns the user's time limit
(``placer solve --time-limit``) makes one and passes it down; every phase (bounds, heuristics,
each CP-SAT level, the infeasibility explanation, the bisections for the largest concurrency or
context that fits) asks it how long it may still run, so the phases together stay within the
limit instead of each taking a fresh one.

Ctrl-C is process-wide by nature: the CP-SAT adapter catches the :class:`KeyboardInterrupt`, stops
the search and calls :func:`note_interrupt`; from then on every deadline reports itself expired,
so loops over phases or probes (``compare``'s rows, a bisection, the explanation) end at once with
what they have instead of starting the next step.

Who forgets a Ctrl-C: the outermost :func:`interrupt_scope`. The command line, ``place()`` and
every caller that owns a sequence of solves (``compare``'s rows, the degrees of ``search_layouts``,
``simulate``'s modes) run inside one; the outermost scope forgets an earlier Ctrl-C when it opens
(an earlier call's interrupt never cuts a later solve short) and when it closes (the interrupt has
been reported by then), and nested scopes leave the flag alone. So a Ctrl-C noted anywhere inside
a command or a sequence stays set until its owner has seen it: a nested ``place()`` that starts
with the flag set runs no method and returns an interrupted result, and an owner checks
:func:`interrupted` before it starts the next solve.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["Deadline", "DeadlineReached", "note_interrupt", "interrupted", "clear_interrupt", "interrupt_scope",
           "process_started", "command_started", "start_command"]

_INTERRUPT = threading.Event()
_SCOPE_LOCK = threading.Lock()
_SCOPE_DEPTH = 0


def note_interrupt() -> None:
    """Record that the user pressed Ctrl-C: every :class:`Deadline` is expired from now on."""
    _INTERRUPT.set()


def interrupted() -> bool:
    """Whether Ctrl-C was pressed since the last :func:`clear_interrupt`."""
    return _INTERRUPT.is_set()


def clear_interrupt() -> None:
    """Forget an earlier Ctrl-C (done by the outermost :func:`interrupt_scope`)."""
    _INTERRUPT.clear()


@contextmanager
def interrupt_scope() -> Iterator[None]:
    """The extent of one call that owns its Ctrl-C (a command, ``place()``, a sequence of solves).

    The outermost scope forgets an earlier Ctrl-C when it opens and when it closes; a nested scope
    changes nothing, so an interrupt noted inside stays visible to the owner until it returns.
    """
    global _SCOPE_DEPTH
    with _SCOPE_LOCK:
        outermost = _SCOPE_DEPTH == 0
        _SCOPE_DEPTH += 1
        if outermost:
            _INTERRUPT.clear()
    try:
        yield
    finally:
        with _SCOPE_LOCK:
            _SCOPE_DEPTH -= 1
            if _SCOPE_DEPTH == 0:
                _INTERRUPT.clear()


def process_started() -> float | None:
    """The ``time.monotonic()`` time at which this process started, or None where the system does
    not say (the start time is read from ``/proc/self/stat``, Linux only).

    Field 22 of ``/proc/self/stat`` is the start time in clock ticks since boot, on the clock
    ``CLOCK_BOOTTIME`` reads; the process's age on that clock is carried over to the monotonic
    clock. The resolution is one clock tick (10 ms at the usual 100 ticks per second).
    """
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            stat = f.read()
        ticks = int(stat[stat.rindex(")") + 2:].split()[19])    # fields after the name start at 3
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    now = time.monotonic()
    return now - age if 0.0 <= age < now else None


_COMMAND_START: float | None = None


def start_command(at: float | None = None) -> None:
    """Record when the running command started (``time.monotonic()`` seconds; None: now). The
    command line calls it first thing: with the process's own start when the process runs one
    command, with the call's time when one process runs many (tests, a notebook)."""
    global _COMMAND_START
    _COMMAND_START = time.monotonic() if at is None else float(at)


def command_started() -> float:
    """When the running command started (see :func:`start_command`); now when none was recorded."""
    return time.monotonic() if _COMMAND_START is None else _COMMAND_START


class DeadlineReached(Exception):
    """Raised by work that cannot stop half-way (building a large model) when the deadline passes;
    the caller returns the best it has."""


@dataclass(frozen=True)
class Deadline:
    """The monotonic time (``time.monotonic()`` seconds) by which the work must end; ``inf``: never."""

    end: float = math.inf

    @classmethod
    def after(cls, seconds: float | None) -> Deadline:
        """A deadline ``seconds`` from now (None: no limit). Raises ValueError for a negative budget."""
        if seconds is None:
            return cls()
        if seconds != seconds or seconds < 0:
            raise ValueError(f"a time budget must be a non-negative number of seconds, got {seconds!r}")
        return cls(time.monotonic() + float(seconds))

    @classmethod
    def since_command_start(cls, seconds: float | None) -> Deadline:
        """A deadline ``seconds`` after the running command started (:func:`command_started`): a
        user's ``--time-limit`` counts the process's start-up, imports and spec reading too."""
        if seconds is None:
            return cls()
        if seconds != seconds or seconds < 0:
            raise ValueError(f"a time budget must be a non-negative number of seconds, got {seconds!r}")
        return cls(command_started() + float(seconds))

    @classmethod
    def of(cls, deadline: Deadline | None, seconds: float | None = None) -> Deadline:
        """``deadline`` itself, or (None) a new one ``seconds`` from now; with both, the earlier end."""
        if deadline is None:
            return cls.after(seconds)
        return deadline if seconds is None else deadline.within(seconds)

    def remaining(self) -> float:
        """Seconds left (0.0 once passed or after Ctrl-C; ``inf`` without a limit)."""
        if _INTERRUPT.is_set():
            return 0.0
        if self.end == math.inf:
            return math.inf
        return max(0.0, self.end - time.monotonic())

    def expired(self) -> bool:
        """No time left (the end has passed, or Ctrl-C was pressed)."""
        return self.remaining() <= 0.0

    def within(self, seconds: float) -> Deadline:
        """A deadline at most ``seconds`` from now and never after this one (a phase's own cap)."""
        return Deadline(min(self.end, time.monotonic() + max(0.0, float(seconds))))

    def check(self) -> None:
        """Raise :class:`DeadlineReached` when no time is left."""
        if self.expired():
            raise DeadlineReached()

    def budget(self, cap: float | None = None) -> float:
        """Seconds a phase starting now may use: what is left, at most ``cap``."""
        left = self.remaining()
        return left if cap is None else min(left, cap)
