"""The stage mapping: the document a plan is written as, its schema, reading and writing, rebuilding
it from its specs, and the independent validator with its per-rank rules.

Modules, in dependency order: :mod:`~placer.mapping.schema` (JSON Schema and check),
:mod:`~placer.mapping.document` (build from a placement), :mod:`~placer.mapping.serving` (how a
speed-floor plan is served), :mod:`~placer.mapping.io` (read, write,
reload the specs and instance), :mod:`~placer.mapping.view` (the typed, read-only view every reader
reads a document through; its docstring names placer's stages and groups), :mod:`~placer.mapping.rebuild`,
:mod:`~placer.mapping.ranks` (the validator's own per-rank byte rules) and :mod:`~placer.mapping.validate`
with :mod:`~placer.mapping.checks` and :mod:`~placer.mapping.violations` (shares no code with the
solver). The format: ``docs/mapping-format.md``.
"""

from placer.mapping.document import build_mapping, expert_groups_of, load_options_of
from placer.mapping.io import (
    compact_json,
    dumps_mapping,
    instance_from_mapping,
    read_mapping,
    specs_from_mapping,
    write_mapping,
)
from placer.mapping.schema import READS_VERSIONS, SCHEMA_VERSION, check_mapping, mapping_schema
from placer.mapping.serving import serving_doc, serving_of, speed_floor_mapping
from placer.mapping.view import MappingStage, MappingView, PooledView, mapping_view

__all__ = [
    "SCHEMA_VERSION", "READS_VERSIONS", "build_mapping", "mapping_schema", "check_mapping", "read_mapping",
    "write_mapping", "dumps_mapping", "compact_json", "specs_from_mapping", "instance_from_mapping",
    "expert_groups_of", "load_options_of", "serving_doc", "speed_floor_mapping", "serving_of",
    "MappingView", "PooledView", "MappingStage", "mapping_view",
]
