"""Regenerate the vendored runtime functions and tables in this folder from the runtimes' own wheels.

    pip download --no-deps vllm==0.33.0 sglang==0.5.23 -d /tmp/wheels
    python tests/vendored/extract.py /tmp/wheels
    # megatron_hybrid_0_19_0.py: NVIDIA/Megatron-LM tag core_v0.19.0,
    #   megatron/core/models/hybrid/hybrid_layer_allocation.py (see the note at its top)

Each output keeps the source file's license header, names the wheel, version, path and the
file's sha256 as the wheel's RECORD lists it, and holds the function verbatim; only the module
globals it reads (vLLM's ``envs``, a logger) are stood in for, as the note in the file says.
Not run by the tests: the vendored files are committed, so CI needs neither wheel.
"""

from __future__ import annotations

import ast
import base64
import hashlib
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

SOURCES = [
    # (wheel glob, path in the wheel, function, output, stand-ins for the module globals it reads)
    ("vllm-0.33.0-*.whl", "vllm/distributed/utils.py", "get_pp_indices", "vllm_0_33_0_pp.py",
     "import logging\nimport os\n\n\n"
     "class _Envs:\n"
     "    # vllm/envs.py: \"VLLM_PP_LAYER_PARTITION\": lambda: os.getenv(\"VLLM_PP_LAYER_PARTITION\", None)\n"
     "    @property\n    def VLLM_PP_LAYER_PARTITION(self):\n"
     "        return os.getenv(\"VLLM_PP_LAYER_PARTITION\", None)\n\n\n"
     "envs = _Envs()\nlogger = logging.getLogger(\"vllm.distributed.utils\")\n"),
    ("sglang-0.5.23-*.whl", "sglang/srt/distributed/utils.py", "get_pp_indices", "sglang_0_5_23_pp.py",
     "import logging\nimport os\nfrom typing import Tuple\n\nlogger = logging.getLogger(\"sglang.srt.distributed.utils\")\n"),
]


def _header(text: str) -> str:
    lines = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        lines.append(line)
    return "\n".join(lines)


def main(wheels: str) -> None:
    for pattern, member, func, out, shim in SOURCES:
        wheel = sorted(Path(wheels).glob(pattern))[-1]
        text, listed = _member(wheel, member)
        node = next(n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == func)
        body = ast.get_source_segment(text, node)
        note = (f"# Vendored for placer's conformance tests: {func}() verbatim from the {wheel.name} wheel,\n"
                f"# {member} (RECORD {listed}), lines {node.lineno}-{node.end_lineno}.\n"
                f"# Only the module globals it reads are stood in for below. Regenerate: tests/vendored/extract.py\n")
        (HERE / out).write_text(f"{_header(text)}\n{note}\n{shim}\n\n{body}\n", encoding="utf-8")
        print(f"{out}: {member} lines {node.lineno}-{node.end_lineno} of {wheel.name}")


def _member(wheel: Path, member: str) -> tuple[str, str]:
    """(text, RECORD digest) of ``member`` of ``wheel``, the digest checked against the RECORD."""
    with zipfile.ZipFile(wheel) as z:
        raw = z.read(member)
        record = next(n for n in z.namelist() if n.endswith(".dist-info/RECORD"))
        rows = [r.split(",") for r in z.read(record).decode().splitlines()]
    listed = next(r[1] for r in rows if r[0] == member)
    digest = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(raw).digest()).rstrip(b"=").decode()
    assert digest == listed, f"{member}: {digest} != RECORD {listed}"
    return raw.decode(), listed


def _fields(text: str, cls: str) -> list[tuple[str, str]]:
    """(name, annotation source) of the annotated attributes of class ``cls``, in order."""
    node = next(n for n in ast.parse(text).body if isinstance(n, ast.ClassDef) and n.name == cls)
    return [(a.target.id, ast.get_source_segment(text, a.annotation)) for a in node.body
            if isinstance(a, ast.AnnAssign) and isinstance(a.target, ast.Name)]


def speculative_tables(wheels: str) -> None:
    """The speculative-decoding flags' specification: vLLM's method names and SpeculativeConfig
    fields (what ``--speculative-config`` JSON may hold), SGLang's algorithm names, spec fields
    and their flag-name rule."""
    wheel = sorted(Path(wheels).glob("vllm-0.33.0-*.whl"))[-1]
    member = "vllm/config/speculative.py"
    text, listed = _member(wheel, member)
    tree = ast.parse(text)
    literals = [n for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)
                and n.targets[0].id.endswith(("Types", "Method"))]
    first, last = literals[0].lineno, literals[-1].end_lineno
    body = "\n".join(text.splitlines()[first - 1:last])
    names = [n for n, _ in _fields(text, "SpeculativeConfig")]
    out = (f"{_header(text)}\n# Vendored for placer's conformance tests from the {wheel.name} wheel, {member}\n"
           f"# (RECORD {listed}): lines {first}-{last} verbatim (the method names), then the names of\n"
           f"# SpeculativeConfig's fields (what --speculative-config JSON may set), listed from the class.\n"
           f"# Regenerate: tests/vendored/extract.py\n\nfrom typing import Literal\n\n{body}\n\n"
           f"SPECULATIVE_CONFIG_FIELDS = {tuple(names)!r}\n")
    (HERE / "vllm_0_33_0_spec.py").write_text(out, encoding="utf-8")
    print(f"vllm_0_33_0_spec.py: {member} lines {first}-{last}, {len(names)} fields")

    wheel = sorted(Path(wheels).glob("sglang-0.5.23-*.whl"))[-1]
    parts = []
    for member, what in (("sglang/srt/speculative/spec_info.py", "SpeculativeAlgorithm"),
                         ("sglang/srt/speculative/spec_registry.py", "_RESERVED_ALIASES"),
                         ("sglang/srt/arg_groups/arg_utils.py", "_field_to_cli_name"),
                         ("sglang/srt/arg_groups/fields/spec.py", "Spec")):
        text, listed = _member(wheel, member)
        node = next(n for n in ast.parse(text).body if getattr(n, "name", None) == what or (
            isinstance(n, ast.Assign) and getattr(n.targets[0], "id", None) == what))
        if what == "SpeculativeAlgorithm":     # the members only: its methods import the server
            members = [ast.get_source_segment(text, a) for a in node.body if isinstance(a, ast.Assign)]
            segment = "class SpeculativeAlgorithm(Enum):\n" + "\n".join(f"    {m}" for m in members)
            lines = f"members of lines {node.lineno}-{node.end_lineno}"
        elif what == "Spec":                   # the field names only: the annotations import the server
            names = [n for n, _ in _fields(text, "Spec")]
            segment = f"SPEC_FIELDS = {tuple(names)!r}"
            lines = f"field names of class Spec, lines {node.lineno}-{node.end_lineno}"
        else:
            segment = ast.get_source_segment(text, node)
            lines = f"lines {node.lineno}-{node.end_lineno} verbatim"
        parts.append(f"# {member} (RECORD {listed}): {lines}\n{segment}\n")
    out = (f"{_header(text)}\n# Vendored for placer's conformance tests from the {wheel.name} wheel: the\n"
           f"# speculative-decoding algorithm names, the aliases it reserves, the rule that names a field's flag\n"
           f"# and the fields of the spec namespace (each flag is --field-name). Regenerate: tests/vendored/extract.py\n\n"
           f"from enum import Enum, auto\n\n\n" + "\n\n".join(parts))
    (HERE / "sglang_0_5_23_spec.py").write_text(out, encoding="utf-8")
    print("sglang_0_5_23_spec.py written")


def _constants(tree) -> dict:
    """Module-level ``NAME = [str, ...]`` / ``(str, ...)`` constants of a parsed module."""
    out = {}
    for n in tree.body:
        if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name):
            try:
                value = ast.literal_eval(n.value)
            except ValueError:
                continue
            if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
                out[n.targets[0].id] = tuple(value)
    return out


def _sglang_field(text: str, ann, name: str, consts: dict) -> dict:
    """One ``A[type, "help" | Arg(...)]`` field: its flags, whether the CLI skips it, its choices."""
    elts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
    kind = ast.get_source_segment(text, elts[0])
    info = {"type": kind, "flags": ["--" + name.replace("_", "-")], "no_cli": False, "choices": None}
    lit = elts[0]
    if isinstance(lit, ast.Subscript) and getattr(lit.value, "id", None) == "Literal":
        info["choices"] = tuple(ast.literal_eval(lit.slice) if isinstance(lit.slice, ast.Tuple)
                                else (ast.literal_eval(lit.slice),))
    for meta in elts[1:]:
        if not (isinstance(meta, ast.Call) and getattr(meta.func, "id", None) == "Arg"):
            continue
        for kw in meta.keywords:
            if kw.arg == "cli_name":
                info["flags"][0] = ast.literal_eval(kw.value)
            elif kw.arg == "aliases":
                info["flags"] += list(ast.literal_eval(kw.value))
            elif kw.arg == "no_cli":
                info["no_cli"] = bool(ast.literal_eval(kw.value))
            elif kw.arg == "choices":
                try:
                    info["choices"] = tuple(ast.literal_eval(kw.value))
                except ValueError:
                    info["choices"] = consts.get(getattr(kw.value, "id", None))
    info["flags"] = tuple(info["flags"])
    return info


def serving_tables(wheels: str) -> None:
    """The launch flags the exports use, as each runtime's own argument code defines them: SGLang's
    fields (each a flag, its aliases, whether the CLI skips it, its choices) from
    ``sglang/srt/arg_groups/fields/*.py``, and vLLM's engine flags (the ``add_argument`` names of
    ``EngineArgs.add_cli_args``) with the fields ``--kv-transfer-config`` JSON may set."""
    wheel = sorted(Path(wheels).glob("sglang-0.5.23-*.whl"))[-1]
    with zipfile.ZipFile(wheel) as z:
        members = sorted(n for n in z.namelist() if n.startswith("sglang/srt/arg_groups/fields/")
                         and n.endswith(".py") and not n.endswith("__init__.py"))
    consts: dict = {}
    for member in ["sglang/srt/arg_groups/choices.py", "sglang/srt/arg_groups/fields/__init__.py", *members]:
        try:
            text, _ = _member(wheel, member)
        except (KeyError, StopIteration):
            continue
        consts.update(_constants(ast.parse(text)))
    fields, sources = {}, []
    for member in members:
        text, listed = _member(wheel, member)
        tree = ast.parse(text)
        local = {**consts, **_constants(tree)}
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            for a in cls.body:
                if (isinstance(a, ast.AnnAssign) and isinstance(a.target, ast.Name)
                        and isinstance(a.annotation, ast.Subscript) and getattr(a.annotation.value, "id", None) == "A"):
                    fields[a.target.id] = _sglang_field(text, a.annotation, a.target.id, local)
        sources.append(f"# {member} (RECORD {listed})")
    out = (f"# Vendored for placer's conformance tests from the {wheel.name} wheel: every server field of\n"
           f"# sglang/srt/arg_groups/fields/*.py as its CLI registers it (the flag --field-name or its\n"
           f"# cli_name, its aliases, no_cli: not a flag, choices from its Literal type or Arg(choices=)),\n"
           f"# read from the classes' annotations. Regenerate: tests/vendored/extract.py\n" + "\n".join(sources)
           + f"\n\nFIELDS = {fields!r}\n")
    (HERE / "sglang_0_5_23_cli.py").write_text(out, encoding="utf-8")
    print(f"sglang_0_5_23_cli.py: {len(fields)} fields")

    wheel = sorted(Path(wheels).glob("vllm-0.33.0-*.whl"))[-1]
    member = "vllm/engine/arg_utils.py"
    text, listed = _member(wheel, member)
    tree = ast.parse(text)
    engine = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "EngineArgs")
    adder = next(n for n in engine.body if isinstance(n, ast.FunctionDef) and n.name == "add_cli_args")
    flags = sorted({a.value for c in ast.walk(adder) if isinstance(c, ast.Call)
                    and getattr(c.func, "attr", None) == "add_argument"
                    for a in c.args if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-")})
    kv_member = "vllm/config/kv_transfer.py"
    kv_text, kv_listed = _member(wheel, kv_member)
    kv_tree = ast.parse(kv_text)
    kv_fields = [n for n, _ in _fields(kv_text, "KVTransferConfig")]
    aliases = {n.targets[0].id: n.value for n in kv_tree.body if isinstance(n, ast.Assign)
               and isinstance(n.targets[0], ast.Name) and isinstance(n.value, ast.Subscript)}

    def literal(node) -> list[str]:     # Literal["a", "b"], or a Literal of such aliases, flattened
        if isinstance(node, ast.Name):
            return literal(aliases[node.id])
        if isinstance(node, ast.Subscript):
            return literal(node.slice)
        if isinstance(node, ast.Tuple):
            return [v for e in node.elts for v in literal(e)]
        return [ast.literal_eval(node)]
    roles = tuple(dict.fromkeys(literal(aliases["KVRole"])))
    fe_member = "vllm/entrypoints/common/cli_args.py"
    fe_text, fe_listed = _member(wheel, fe_member)
    # FrontendArgs.add_cli_args: f"--{key.replace('_', '-')}" for every field of the class and its base
    frontend = sorted({"--" + n.replace("_", "-") for cls in ("BaseFrontendArgs", "FrontendArgs")
                       for n, _ in _fields(fe_text, cls)})
    out = (f"# Vendored for placer's conformance tests from the {wheel.name} wheel: the engine flags\n"
           f"# EngineArgs.add_cli_args registers ({member}, RECORD {listed}, lines\n"
           f"# {adder.lineno}-{adder.end_lineno}: the names of its add_argument calls), the OpenAI server's flags\n"
           f"# (--field-name of BaseFrontendArgs and FrontendArgs, {fe_member}, RECORD {fe_listed}) and the\n"
           f"# fields and roles of KVTransferConfig ({kv_member}, RECORD {kv_listed}).\n"
           f"# Regenerate: tests/vendored/extract.py\n\n"
           f"ENGINE_FLAGS = {tuple(flags)!r}\nFRONTEND_FLAGS = {tuple(frontend)!r}\n"
           f"KV_TRANSFER_FIELDS = {tuple(kv_fields)!r}\nKV_ROLES = {roles!r}\n")
    (HERE / "vllm_0_33_0_cli.py").write_text(out, encoding="utf-8")
    print(f"vllm_0_33_0_cli.py: {len(flags)} engine flags, {len(kv_fields)} KV transfer fields")


if __name__ == "__main__":
    main(sys.argv[1])
    speculative_tables(sys.argv[1])
    serving_tables(sys.argv[1])
