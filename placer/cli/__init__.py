"""The ``placer`` command line: thin commands that parse flags, call one function and print.

Each command lives in its own module of this package and is loaded on demand. Every error a user
can cause becomes one line on stderr (``error: <file>: <field>: <what>``) and exit code 2.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys

import click

from ..errors import PlacerError

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
        return getattr(mod, attr)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(package_name="placer")
def cli():
    """Plan how a model's layers are placed on a fleet of accelerators."""


def _click_error(exc: click.ClickException) -> str:
    """``<option>: <parameter>: <message>`` for a bad flag, ``<command>: -: <message>`` otherwise."""
    param = getattr(exc, "param", None)
    if param is not None:
        where = param.opts[0] if isinstance(param, click.Option) else param.human_readable_name
        message = exc.message if isinstance(exc, click.BadParameter) and exc.message else exc.format_message()
        return f"{where}: {param.name}: {message}"
    ctx = getattr(exc, "ctx", None)
    return f"{ctx.command_path if ctx else 'placer'}: -: {exc.format_message()}"


def main(argv=None):
    try:
        rv = cli.main(args=argv, standalone_mode=False)
    except PlacerError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("error: aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        # One line like every other error (not click's usage block): which option, what is wrong.
        click.echo(f"error: {_click_error(exc)}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("error: interrupted", err=True)
        sys.exit(130)
    except Exception as exc:  # a bug, not bad input: say so in one line unless debugging
        if os.environ.get("PLACER_DEBUG"):
            raise
        click.echo(f"error: internal error: {type(exc).__name__}: {exc} (set PLACER_DEBUG=1 for a traceback)",
                   err=True)
        sys.exit(3)
    sys.exit(rv if isinstance(rv, int) else 0)
