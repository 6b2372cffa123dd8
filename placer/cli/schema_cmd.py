from __future__ import annotations

import click

from ..mapping import mapping_schema
from .common import echo_json


@click.command("schema")
def schema_command():
    """Print the JSON Schema (draft 2020-12) of the stage-mapping file."""
    echo_json(mapping_schema())
