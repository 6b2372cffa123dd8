"""Regenerate the vendored runtime functions in this folder from the runtimes' own wheels.

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
        with zipfile.ZipFile(wheel) as z:
            raw = z.read(member)
            record = next(n for n in z.namelist() if n.endswith(".dist-info/RECORD"))
            rows = [r.split(",") for r in z.read(record).decode().splitlines()]
        listed = next(r[1] for r in rows if r[0] == member)
        digest = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(raw).digest()).rstrip(b"=").decode()
        assert digest == listed, f"{member}: {digest} != RECORD {listed}"
        text = raw.decode()
        node = next(n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == func)
        body = ast.get_source_segment(text, node)
        note = (f"# Vendored for placer's conformance tests: {func}() verbatim from the {wheel.name} wheel,\n"
                f"# {member} (RECORD {listed}), lines {node.lineno}-{node.end_lineno}.\n"
                f"# Only the module globals it reads are stood in for below. Regenerate: tests/vendored/extract.py\n")
        (HERE / out).write_text(f"{_header(text)}\n{note}\n{shim}\n\n{body}\n", encoding="utf-8")
        print(f"{out}: {member} lines {node.lineno}-{node.end_lineno} of {wheel.name}")


if __name__ == "__main__":
    main(sys.argv[1])
