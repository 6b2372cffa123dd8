from __future__ import annotations

import click

from placer.cli.common import input_file, output_file
from placer.export import FORMATS, ExportOptions, export_mapping
from placer.mapping import read_mapping
from placer.specs.spec_io import atomic_write_text


@click.command("export")
@click.argument("mapping", type=input_file)
@click.option("--format", "fmt", type=click.Choice(list(FORMATS)), required=True,
              help="vllm / sglang: the launch command with the partition variable; megatron: the flags "
                   "(layout or hybrid pattern, layer kinds); torch: a pipelining script; json: executor manifest.")
@click.option("--bare", is_flag=True,
              help="Only the runtime's value: the partition string, the Megatron layout or hybrid pattern, "
                   "the torch split points as JSON.")
@click.option("--force", is_flag=True,
              help="Export even for a runtime release the support table says cannot run the model.")
@click.option("--runtime-version", default=None,
              help="Runtime release whose syntax and support apply (vllm 0.33.0, sglang 0.5.23, "
                   "megatron 0.16.1 by default; megatron also 0.17..0.19 or main).")
@click.option("--served-model", default=None,
              help="What the command loads: a Hugging Face id or a checkpoint directory "
                   "(default: the mapping's model name).")
@click.option("--served-draft-model", default=None,
              help="The draft checkpoint a speculative plan's command loads (--spec-method eagle3 or "
                   "draft_model; default: the draft spec's name).")
@click.option("--model", "model_ref", default=None,
              help="Model catalog name or spec file (default: the one the mapping names).")
@click.option("--hardware", "-H", "hardware_ref", default=None,
              help="Hardware catalog name or spec file (default: the one the mapping names).")
@click.option("--tier", type=click.Choice(("host", "nvme", "remote")), default=None,
              help="Offload idle KV to this tier of the hardware spec: vLLM's --kv-offloading-size, SGLang's "
                   "--enable-hierarchical-cache (--hicache-size); a runtime without such a setting says so.")
@click.option("--tier-size", default=None, metavar="BYTES",
              help="Tier bytes per GPU (e.g. 200GB; default: the hardware spec's tier capacity per device).")
@click.option("-o", "--output", default=None, type=output_file,
              help="Write to this file instead of stdout.")
def export_command(mapping, fmt, bare, force, runtime_version, served_model, served_draft_model, model_ref,
                   hardware_ref, tier, tier_size, output):
    """Print MAPPING in a runtime's format, after validating it and re-running the runtime's own checks.

    Free mappings, split mappings that cut a layer across devices, and models the runtime release
    does not run (unless --force) are refused (exit 2) except by --format json.
    """
    doc = read_mapping(mapping)
    from placer.specs.errors import InvalidSpec
    from placer.specs.units import parse_bytes

    if tier_size is not None and tier is None:
        raise InvalidSpec("--tier-size", "tier_size", "sizes a tier: give --tier too")
    try:
        tier_bytes = None if tier_size is None else parse_bytes(tier_size)
    except (ValueError, TypeError):
        raise InvalidSpec("--tier-size", "tier_size", f"{tier_size!r}: bytes (200GB)") from None
    options = ExportOptions(bare=bare, force=force, runtime_version=runtime_version, served_model=served_model,
                            mapping_path=mapping, served_draft_model=served_draft_model, tier=tier,
                            tier_bytes=tier_bytes)
    result = export_mapping(doc, fmt, model=model_ref, fleet=hardware_ref, source=mapping, options=options)
    for w in result.warnings:
        click.echo(f"warning: {w}", err=True)
    if output:
        atomic_write_text(output, result.text + "\n")
    else:
        click.echo(result.text)
