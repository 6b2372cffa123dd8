from __future__ import annotations

import click

from placer.cli.common import image_file, input_file
from placer.specs.errors import InvalidSpec
from placer.specs.spec_io import load_yaml_or_json


def _check_mapping(doc, path):
    stages = doc.get("stages")
    if not isinstance(stages, list) or not stages:
        raise InvalidSpec(path, "stages", "a mapping needs a non-empty list of stages")
    for i, s in enumerate(stages):
        if not isinstance(s, dict) or not isinstance(s.get("device"), str):
            raise InvalidSpec(path, f"stages.{i}.device", "each stage needs a device id")
        b = s.get("bytes", {})
        if not isinstance(b, dict) or any(not isinstance(v, (int, float)) or isinstance(v, bool)
                                          for v in b.values()):
            raise InvalidSpec(path, f"stages.{i}.bytes", "expected a mapping of byte counts")
    if not isinstance(doc.get("route", []), list):
        raise InvalidSpec(path, "route", "expected a list of device ids")


@click.command("plot")
@click.argument("source", type=input_file)
@click.option("-o", "--output", "out", required=True, type=image_file,
              help="Image file to write, exactly there (PNG, or SVG / PDF by suffix).")
@click.option("--hardware", "-H", default=None, help="Fleet to draw (default: the hardware the mapping names).")
@click.option("--racks", type=click.IntRange(1, 100000), default=None, help="Resize that fleet.")
@click.option("--racks-per-row", type=click.IntRange(1, 1000), default=None)
@click.option("--title", default=None)
@click.option("--reference", "references", multiple=True, metavar="LABEL=N",
              help="For a results CSV: a labelled device count to draw (repeatable).")
def plot_command(source, out, hardware, racks, racks_per_row, title, references):
    """Draw a stage mapping (JSON) on its fleet, or the frontier of a sweep results CSV."""
    from placer.plotting import plot_frontiers, plot_layout, save

    if str(source).endswith(".csv"):
        from placer.cli.sweep_cmd import parse_references
        from placer.planning.studies.sweep import read_rows

        rows = read_rows(source)
        if not rows:
            raise InvalidSpec(source, "-", "no rows to plot")
        figure = plot_frontiers(rows, fleet_devices=rows[0].get("fleet_devices"),
                                references=parse_references(references),
                                title=title or f"{rows[0]['model']} on {rows[0]['hardware']}: devices vs live requests")
    else:
        doc, _ = load_yaml_or_json(source)
        _check_mapping(doc, source)
        fleet = None
        if hardware:
            from placer.specs.fleet import load_fleet

            fleet = load_fleet(hardware, racks=racks)
        figure = plot_layout(doc, fleet=fleet, racks_per_row=racks_per_row, title=title).figure
    click.echo(f"wrote {save(figure, out)}")
