from __future__ import annotations

import click

from placer.cli.common import echo_json
from placer.mapping import mapping_schema


@click.command("schema")
def schema_command():
    """Print the JSON Schema (draft 2020-12) of the stage-mapping file."""
    echo_json(mapping_schema())
