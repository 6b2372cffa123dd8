from __future__ import annotations

import click

from placer.cli.common import echo_json, input_file, output_file, workload_text
from placer.mapping import read_mapping
from placer.mapping.validate import validate_mapping
from placer.specs.errors import InvalidSpec
from placer.specs.units import plural


@click.command("validate")
@click.argument("mapping", type=input_file)
@click.option("--model", "model_ref", default=None,
              help="Model catalog name or spec file (default: the one the mapping names).")
@click.option("--hardware", "-H", "hardware_ref", default=None,
              help="Hardware catalog name or spec file (default: the one the mapping names).")
@click.option("--rebuild", is_flag=True,
              help="Recompute every derived field (route, bytes, racks, next hops, stage order, summary) "
                   "from the stages' devices and layers, check the result and write it to -o.")
@click.option("-o", "--output", default=None, type=output_file,
              help="With --rebuild: where to write the rebuilt mapping (only when it is valid).")
@click.option("--json", "as_json", is_flag=True, help='Print {"valid": bool, "violations": [{"kind", "message"}]}.')
def validate_command(mapping, model_ref, hardware_ref, rebuild, output, as_json):
    """Check MAPPING against the specs it names, recomputing every byte.

    Exit 0 when valid, 1 when violations were found (all are listed), 2 when the mapping or a spec
    cannot be read. After a hand edit (moving layers, swapping devices), --rebuild -o FIXED
    recomputes what follows from the stages, so only real violations remain.
    """
    if rebuild:
        return _rebuild(mapping, model_ref, hardware_ref, output, as_json)
    if output:
        raise InvalidSpec("-o", "output", "writes the rebuilt mapping: use it with --rebuild")
    doc = read_mapping(mapping)
    violations = validate_mapping(doc, model=model_ref, fleet=hardware_ref, source=mapping)
    _report(mapping, doc, violations, as_json)
    return 1 if violations else 0


def _report(mapping, doc, violations, as_json, **extra) -> None:
    if doc.get("kind") == "disaggregated":
        return _report_pooled(mapping, doc, violations, as_json)
    if doc.get("kind") == "fleet":
        return _report_fleet(mapping, doc, violations, as_json)
    if as_json:
        echo_json({"valid": not violations, "violations": [v.to_dict() for v in violations],
                   "workload": doc.get("workload"), **extra})
    elif violations:
        click.echo(f"{mapping}: {len(violations)} violation(s)")
        click.echo(workload_text(doc["workload"]))
        for v in violations:
            click.echo(f"  {v.kind}: {v.message}")
    else:
        s = doc["summary"]
        click.echo(f"{mapping}: valid ({doc['model']['name']} on {doc['hardware']['name']}, {doc['mode']}, "
                   f"{plural(s['devices_used'], 'device')}, {plural(s['hops'], 'hop')}, concurrency ceiling "
                   f"{s['concurrency_ceiling']})")
        click.echo(workload_text(doc["workload"]))


def _report_parts(mapping, violations, as_json, workload, valid_lines) -> None:
    """A mapping of several parts (pools, models): the JSON with ``workload()``, the violations, or
    ``valid_lines()`` when there are none."""
    if as_json:
        echo_json({"valid": not violations, "violations": [v.to_dict() for v in violations], "workload": workload()})
    elif violations:
        click.echo(f"{mapping}: {len(violations)} violation(s)")
        for v in violations:
            click.echo(f"  {v.kind}: {v.message}")
    else:
        for line in valid_lines():
            click.echo(line)


def _report_pooled(mapping, doc, violations, as_json) -> None:
    pools = doc["pools"]

    def valid_lines():
        r = doc["replicas"]
        yield (f"{mapping}: valid (two pools of {doc['model']['name']}: {r['prefill']} prefill x "
               f"{pools['prefill']['summary']['devices_used']} devices on {pools['prefill']['hardware']['name']}, "
               f"{r['decode']} decode x {pools['decode']['summary']['devices_used']} devices on "
               f"{pools['decode']['hardware']['name']}; {doc['summary']['devices_used']} devices)")
        for p in ("prefill", "decode"):
            yield f"{p}: " + workload_text(pools[p]["workload"])

    _report_parts(mapping, violations, as_json, lambda: {p: pools[p]["workload"] for p in pools}, valid_lines)


def _report_fleet(mapping, doc, violations, as_json) -> None:
    """A fleet mapping (several models, placer.mapping.fleet_mapping): one line per model."""
    models = doc["models"]

    def valid_lines():
        yield (f"{mapping}: valid ({len(models)} models on {doc['hardware']['name']}, "
               f"{plural(doc['summary']['devices_used'], 'device')})")
        for m in models:
            counts = ", ".join(str(p["summary"]["devices_used"]) for p in m["pipelines"])
            yield (f"  {m['name']}: {plural(len(m['pipelines']), 'pipeline')} of {counts} device(s); "
                   + workload_text(m["pipelines"][0]["workload"]))

    _report_parts(mapping, violations, as_json,
                  lambda: {m["name"]: [p["workload"] for p in m["pipelines"]] for m in models}, valid_lines)


def _rebuild(mapping, model_ref, hardware_ref, output, as_json) -> int:
    from placer.mapping import write_mapping
    from placer.mapping.rebuild import read_stages, rebuild_mapping

    if not output:
        raise InvalidSpec("--rebuild", "output", "needs -o FIXED, the file to write the rebuilt mapping to")
    doc = read_stages(mapping)
    rebuilt = rebuild_mapping(doc, model=model_ref, hardware=hardware_ref)
    if rebuilt.mapping is None:
        violations, fixed = list(rebuilt.problems), doc
    else:
        fixed = rebuilt.mapping
        violations = validate_mapping(fixed, model=model_ref, fleet=hardware_ref, source=mapping)
    written = None
    if not violations:
        write_mapping(output, fixed)
        written = str(output)
    if as_json:
        _report(mapping, fixed, violations, True, rebuilt=rebuilt.mapping is not None,
                placement_changed=rebuilt.placement_changed, written=written)
        return 1 if violations else 0
    if rebuilt.mapping is None:
        click.echo(f"{mapping}: the stages cannot be read as a placement, so nothing was rebuilt")
    else:
        click.echo(f"{mapping}: route, stage bytes, racks, next hops, stage order and summary rebuilt from the "
                   f"stages")
        if rebuilt.placement_changed:
            click.echo("  the stages are not the placement the method wrote: its claims (status, proof, bounds) "
                       "are dropped (method edited, status heuristic)")
    _report(mapping, fixed, violations, False)
    click.echo(f"wrote {written}" if written else f"{output} not written: fix the stages in {mapping} and "
                                                  f"run again")
    return 1 if violations else 0
