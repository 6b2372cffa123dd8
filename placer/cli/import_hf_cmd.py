from __future__ import annotations

import click

from placer.cli.common import output_file, text_only_option
from placer.specs.hf.spec_file import import_hf


@click.command("import-hf")
@click.argument("config")
@click.option("-o", "--output", default=None, metavar="PATH", type=output_file,
              help="Write the model spec here (atomically) instead of printing it.")
@text_only_option("Leave the vision/audio tower of a multimodal config out of the spec (the text model alone).")
def import_hf_command(config, output, text_only):
    """Turn a Hugging Face CONFIG.json (or a snapshot directory holding one) into a placer model spec (YAML).

    Families the interpreter reads are listed in the README (`placer import-hf --help`); others are
    read from transformers' module tree on the meta device with the optional extra placer[hf]
    (the CPU build of torch is enough: pip install torch --index-url
    https://download.pytorch.org/whl/cpu, then pip install 'placer[hf]').
    Every command taking a MODEL also accepts the config.json itself.
    """
    text = import_hf(config, output, text_only=text_only)
    if output is None:
        click.echo(text, nl=False)
    else:
        click.echo(f"wrote {output}", err=True)
