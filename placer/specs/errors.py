"""Errors placer raises on purpose.

Every error a user can cause is a :class:`PlacerError`; the CLI prints it as one line
(``error: <file>: <field>: <what is wrong>``) and exits with code 2.
"""

from __future__ import annotations

__all__ = ["PlacerError", "InvalidSpec", "InfeasiblePlacement", "SolverLimitError", "WHOLE_FILE", "ARGUMENT"]

# the field of an error about a whole file (missing, a directory, not UTF-8, not YAML at all)
WHOLE_FILE = "(whole file)"

# the source of an error about an argument of a library call; its field is the argument's name
# (``pins``, ``tp``, ``schedule``...), never a command-line flag: the command line replaces the
# source by the flag that sets the field (placer.cli.name_source)
ARGUMENT = "<argument>"


class PlacerError(Exception):
    """Base class of every error placer reports to a user."""

    exit_code = 2


class InvalidSpec(PlacerError):
    """A spec, workload or mapping cannot be used as written.

    ``source`` names the file, or (:data:`ARGUMENT`) says the error is about an argument of the
    call; ``field`` is the dotted path of the offending value (a spec key, a JSON pointer, the
    argument's name); None (or ``"-"``) when the error concerns the whole file.
    """

    def __init__(self, source: str | None, field: str | None, message: str):
        self.source = source or "<input>"
        self.field = WHOLE_FILE if field in (None, "", "-") else field
        self.message = message
        super().__init__(f"{self.source}: {self.field}: {message}")


class InfeasiblePlacement(PlacerError):
    """No placement exists for the request; ``reason`` says why in actionable terms."""

    def __init__(self, reason: str, *, max_concurrency: int | None = None):
        self.reason = reason
        self.max_concurrency = max_concurrency
        super().__init__(reason)


class SolverLimitError(PlacerError):
    """A model would exceed the solver's integer limits even after quantization."""
