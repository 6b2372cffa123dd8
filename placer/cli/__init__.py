"""The ``placer`` command line: thin commands that parse flags, call one function and print.

Each command lives in its own module of this package and is loaded on demand. Every error a user
can cause becomes one line on stderr (``error: <file>: <field>: <what>``) and exit code 2.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import importlib.util
import os
import sys

import click

from placer.specs.errors import InvalidSpec, PlacerError

__all__ = ["main", "cli"]

# command name -> module (in this package) defining a click command named ``command``
COMMANDS = {
    "inspect": "inspect_cmd",
    "models": "catalog_cmd",
    "hardware": "catalog_cmd",
    "import-hf": "import_hf_cmd",
    "solve": "solve_cmd",
    "compare": "compare_cmd",
    "validate": "validate_cmd",
    "export": "export_cmd",
    "schema": "schema_cmd",
    "run": "run_cmd",
    "simulate": "simulate_cmd",
    "sweep": "sweep_cmd",
    "plot": "plot_cmd",
    "plan": "plan_cmd",
    "frontier": "frontier_cmd",
    "replan": "replan_cmd",
    "plan-fleet": "plan_fleet_cmd",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return sorted(n for n, m in COMMANDS.items()
                      if importlib.util.find_spec(f"{__name__}.{m}") is not None)

    def get_command(self, ctx, name):
        module = COMMANDS.get(name)
        if module is None or importlib.util.find_spec(f"{__name__}.{module}") is None:
            return None
        mod = importlib.import_module(f"{__name__}.{module}")
        attr = name.replace("-", "_") + "_command"
        return _naming_errors(getattr(mod, attr))

    def resolve_command(self, ctx, args):
        name = args[0] if args else None
        if name is not None and not name.startswith("-") and self.get_command(ctx, name) is None:
            known = self.list_commands(ctx)
            near = difflib.get_close_matches(name.casefold(), known, n=3, cutoff=0.5)
            hint = f"; did you mean {' or '.join(near)}?" if near else ""
            raise InvalidSpec(name, "(command)", f"no such command{hint} (commands: {', '.join(known)})")
        return super().resolve_command(ctx, args)


def _naming_errors(command: click.Command) -> click.Command:
    """Wrap ``command``'s callback once so that a library error naming a field of a non-file source
    (``<workload>``, ``<mapping>``...) names the flag or file the user gave instead."""
    if getattr(command, "_names_errors", False):
        return command
    callback = command.callback

    @functools.wraps(callback)
    def run(*args, **kwargs):
        try:
            return callback(*args, **kwargs)
        except InvalidSpec as exc:
            raise name_source(exc, click.get_current_context()) from exc.__cause__

    command.callback = run
    command._names_errors = True
    return command


# a library field -> the parameter (click name) that sets it, where the two names differ
FIELD_PARAMS = {"context_tokens": ("context", "contexts"), "context": ("context", "contexts"),
                "concurrency": ("concurrency", "concurrencies"), "mode": ("mode", "modes"),
                "pin": ("pins",), "pins": ("pins",), "weight_bits": ("weight_bits",),
                "kv_bits": ("kv_bits",), "time_limit": ("time_limit",), "workers": ("workers", "threads", "jobs"),
                "threads": ("threads", "workers"), "jobs": ("jobs", "workers"),
                "tp": ("tp", "tps"), "duration_s": ("duration",)}
# parameters that hold the file a ``<mapping>`` error is about
MAPPING_PARAMS = ("mapping", "target", "source")


def name_source(exc: InvalidSpec, ctx: click.Context | None) -> InvalidSpec:
    """``exc`` with its ``<...>`` source replaced by the flag (or mapping file) the user gave, when
    the running command has one for the field; unchanged otherwise."""
    if ctx is None or not (exc.source.startswith("<") and exc.source.endswith(">")):
        return exc
    params = {p.name: p for p in ctx.command.params}
    if exc.source == "<mapping>":
        for name in MAPPING_PARAMS:
            if ctx.params.get(name):
                return InvalidSpec(str(ctx.params[name]), exc.field, exc.message)
        return exc
    head = exc.field.lstrip("/").split(".")[0].split("/")[0]
    for name in FIELD_PARAMS.get(head, (head,)):
        p = params.get(name)
        if isinstance(p, click.Option):
            return InvalidSpec(p.opts[0], exc.field, exc.message)
    return exc
@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(package_name="placer")
def cli():
    """Plan how a model's layers are placed on a fleet of accelerators."""


def _click_error(exc: click.ClickException) -> str:
    """``<option>: <parameter>: <message>`` for a bad flag; ``<option>: (option): ...`` for an unknown
    one; ``<command>: (arguments): <message>`` for anything else on the command line."""
    param = getattr(exc, "param", None)
    if param is not None:
        where = param.opts[0] if isinstance(param, click.Option) else param.human_readable_name
        message = exc.message if isinstance(exc, click.BadParameter) and exc.message else exc.format_message()
        # the field is the flag's own name (--format: format), never the Python parameter behind it (fmt)
        field = max(param.opts, key=len).lstrip("-").replace("-", "_") if isinstance(param, click.Option) \
            else param.name
        return f"{where}: {field}: {message}"
    if isinstance(exc, click.NoSuchOption):
        return f"{exc.option_name}: (option): {exc.format_message()}"
    ctx = getattr(exc, "ctx", None)
    return f"{ctx.command_path if ctx else 'placer'}: (arguments): {exc.format_message()}"


def main(argv=None):
    """The ``placer`` command. With ``argv`` None (the process runs this one command, its arguments
    in ``sys.argv``) the time limit counts from the process's start and the process ends as soon as
    its output is out (:func:`_leave`); with ``argv`` given (tests, a notebook) from this call, and
    it ends in ``SystemExit`` as usual."""
    from placer.algorithms.deadline import process_started, start_command

    own_process = argv is None
    start_command(process_started() if own_process else None)
    code = _run(argv)
    if own_process:
        _leave(code)
    sys.exit(code)


def _leave(code: int) -> None:
    """End the process with ``code`` once the exit handlers ran and the output is flushed, without
    the interpreter's teardown (finalising OR-Tools, pandas, numpy and the rest takes 0.3 s on an
    idle machine and seconds under load, all after the answer is out)."""
    import atexit
    import threading

    if any(t is not threading.main_thread() and t.is_alive() and not t.daemon for t in threading.enumerate()):
        sys.exit(code)      # a thread still working: the usual exit waits for it
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):     # a closed pipe: nothing more can be said
            pass
    os._exit(code)


def _run(argv) -> int:
    """Run the command and return its exit code; every error becomes one line on stderr."""
    from placer.algorithms.deadline import interrupt_scope

    try:
        with interrupt_scope():     # the command owns its Ctrl-C: noted once, seen by every phase after
            rv = cli.main(args=argv, prog_name="placer", standalone_mode=False)
    except PlacerError as exc:
        click.echo(f"error: {exc}", err=True)
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("error: aborted", err=True)
        return 130
    except click.ClickException as exc:
        # One line like every other error (not click's usage block): which option, what is wrong.
        click.echo(f"error: {_click_error(exc)}", err=True)
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except KeyboardInterrupt:
        click.echo("error: interrupted", err=True)
        return 130
    except Exception as exc:  # a bug, not bad input: say so in one line unless debugging
        if os.environ.get("PLACER_DEBUG"):
            raise
        click.echo(f"error: internal error: {type(exc).__name__}: {exc} (set PLACER_DEBUG=1 for a traceback)",
                   err=True)
        return 3
    return rv if isinstance(rv, int) else 0
