from __future__ import annotations

import click

from ..export import FORMATS, export_mapping
from ..mapping import read_mapping
from ..spec_io import atomic_write_text
from .common import input_file, output_file


@click.command("export")
@click.argument("mapping", type=input_file)
@click.option("--format", "fmt", type=click.Choice(list(FORMATS)), required=True,
              help="vllm / sglang: partition string; megatron: layout (and hybrid pattern); "
                   "torch: pipelining split points; json: executor manifest.")
@click.option("--model", "model_ref", default=None,
              help="Model catalog name or spec file (default: the one the mapping names).")
@click.option("--hardware", "-H", "hardware_ref", default=None,
              help="Hardware catalog name or spec file (default: the one the mapping names).")
@click.option("-o", "--output", default=None, type=output_file,
              help="Write to this file instead of stdout.")
def export_command(mapping, fmt, model_ref, hardware_ref, output):
    """Print MAPPING in a runtime's format, after validating it and re-running the runtime's own checks.

    Free mappings, and split mappings that cut a layer across devices, have no runtime partition
    and are refused (exit 2) except by --format json.
    """
    doc = read_mapping(mapping)
    result = export_mapping(doc, fmt, model=model_ref, fleet=hardware_ref, source=mapping)
    for w in result.warnings:
        click.echo(f"warning: {w}", err=True)
    if output:
        atomic_write_text(output, result.text + "\n")
    else:
        click.echo(result.text)
