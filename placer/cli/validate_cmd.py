from __future__ import annotations

import click

from ..mapping import read_mapping
from ..validate import validate_mapping
from .common import echo_json, input_file, workload_text


@click.command("validate")
@click.argument("mapping", type=input_file)
@click.option("--model", "model_ref", default=None,
              help="Model catalog name or spec file (default: the one the mapping names).")
@click.option("--hardware", "-H", "hardware_ref", default=None,
              help="Hardware catalog name or spec file (default: the one the mapping names).")
@click.option("--json", "as_json", is_flag=True, help='Print {"valid": bool, "violations": [{"kind", "message"}]}.')
def validate_command(mapping, model_ref, hardware_ref, as_json):
    """Check MAPPING against the specs it names, recomputing every byte.

    Exit 0 when valid, 1 when violations were found (all are listed), 2 when the mapping or a spec
    cannot be read.
    """
    doc = read_mapping(mapping)
    violations = validate_mapping(doc, model=model_ref, fleet=hardware_ref, source=mapping)
    if as_json:
        echo_json({"valid": not violations, "violations": [v.to_dict() for v in violations],
                   "workload": doc.get("workload")})
    elif violations:
        click.echo(f"{mapping}: {len(violations)} violation(s)")
        click.echo(workload_text(doc["workload"]))
        for v in violations:
            click.echo(f"  {v.kind}: {v.message}")
    else:
        s = doc["summary"]
        click.echo(f"{mapping}: valid ({doc['model']['name']} on {doc['hardware']['name']}, {doc['mode']}, "
                   f"{s['devices_used']} devices, {s['hops']} hops, concurrency ceiling {s['concurrency_ceiling']})")
        click.echo(workload_text(doc["workload"]))
    return 1 if violations else 0
