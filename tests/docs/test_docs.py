"""The README and docs/ say what the tool prints: every generated block is rerun and compared, prose
states no result of its own, the README fits its budget and its Python example returns a proven plan.

tools/docs.py does the work; these tests run it per block (so xdist spreads them) and check that its
comparisons can fail."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README_BUDGET_CHARS = 12_000


def _load_tool():
    spec = importlib.util.spec_from_file_location("placer_docs_tool", ROOT / "tools" / "docs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


docs = _load_tool()
BLOCKS = [b for page in docs.pages() for b in docs.blocks(page)]


def _param(block):
    marks = [pytest.mark.slow] if block.slow else []
    return pytest.param(block, id=block.name, marks=marks)


def test_the_pages_hold_generated_blocks():
    assert {b.page.name for b in BLOCKS} >= {"README.md", "commands.md", "gpu-fleets.md", "speed-targets.md",
                                              "serving.md", "calibration.md", "methods.md", "hf-import.md"}
    assert all(b.body.strip() for b in BLOCKS), [b.name for b in BLOCKS if not b.body.strip()]


@pytest.mark.parametrize("block", [_param(b) for b in BLOCKS])
def test_block_is_what_the_tool_prints(block):
    diff = docs.differences(block, docs.run(block))
    assert not diff, f"{block.name} ({block.command}) differs; run python tools/docs.py\n" + "\n".join(diff)


@pytest.mark.parametrize("page", docs.pages(), ids=lambda p: p.name)
def test_prose_states_no_number_a_block_does_not_show(page):
    assert docs.unbacked_numbers(page) == []


def test_readme_fits_its_budget():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text) <= README_BUDGET_CHARS, len(text)


def test_readme_python_example_returns_a_proven_plan():
    """The example as written: a proven contiguous plan of Kimi K3 on wafers, 70 of them
    ((K K | K | M) x 23 + M, the worked example by hand)."""
    (example,) = [b for b in BLOCKS if b.page.name == "README.md" and b.code is not None]
    namespace: dict = {}
    exec(compile(example.code, "README.md", "exec"), namespace)
    p = namespace["p"]
    assert p.result.proven_optimal and p.result.status.value == "optimal"
    assert p.result.devices_used == 70
    assert all(level.proven for level in p.result.levels)


# ----------------------------------------------------------------------------- the checks can fail
def test_a_changed_number_in_a_block_is_caught(tmp_path):
    block = next(b for b in BLOCKS if b.page.name == "README.md" and "compare kimi-k3" in b.command)
    output = docs.run(block)
    assert docs.differences(block, output) == []
    changed = output.replace("70*", "71*", 1)
    assert changed != output
    page = tmp_path / "page.md"
    text = block.page.read_text(encoding="utf-8")
    page.write_text(text.replace(block.body, changed, 1), encoding="utf-8")
    (copied,) = [b for b in docs.blocks(page) if b.command == block.command]
    assert any("71*" in line for line in docs.differences(copied, output))


def test_timings_are_left_out_and_nothing_else():
    shown = "status optimal (proven), 592.5 ms\ndevices 70 (lower bound 70), hop latency 161 us over 69 hops"
    timed = "status optimal (proven), 1.583 s\ndevices 70 (lower bound 70), hop latency 161 us over 69 hops"
    assert docs.normalized(shown) == docs.normalized(timed)
    assert docs.normalized(shown) != docs.normalized(shown.replace("161 us", "162 us"))
    table = "method  status   time\ncpsat   optimal  30 ms\ndp      optimal  1.03 s\n* footnote 5 ms"
    assert docs.normalized(table) == docs.normalized(table.replace("30 ms", "2 ms").replace("1.03 s", "5 ms"))
    assert docs.normalized(table) != docs.normalized(table.replace("optimal  30", "feasible  30"))


def test_a_result_stated_in_prose_is_caught(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# A page\n\n<!-- placer-docs: placer hardware -->\n```text\nwse-3t 96 32\n```\n"
                    "<!-- /placer-docs -->\n\nThe fleet has 96 wafers (`--racks 32`), in October 2024,\n"
                    "and the plan needs 71 wafers at 2.3 tokens/s, 1.5x faster, on H100 and llama-3.1-70b.\n",
                    encoding="utf-8")
    assert docs.unbacked_numbers(page) == [f"{page}:10: 71", f"{page}:10: 2.3", f"{page}:10: 1.5"]


def test_check_exits_1_naming_the_page_and_block(tmp_path):
    """python tools/docs.py --check on a page whose block no longer matches the tool."""
    page = tmp_path / "page.md"
    page.write_text("<!-- placer-docs: placer hardware | head -n 2 -->\n```text\nhardware devices\nb200 31\n```\n"
                    "<!-- /placer-docs -->\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "docs.py"), "--check", str(page)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert re.search(rf"{re.escape(str(page))}#0 \(placer hardware \| head -n 2\) differs", proc.stdout)
    rewrite = subprocess.run([sys.executable, str(ROOT / "tools" / "docs.py"), str(page)],
                             capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert rewrite.returncode == 0, rewrite.stderr
    again = subprocess.run([sys.executable, str(ROOT / "tools" / "docs.py"), "--check", str(page)],
                           capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert again.returncode == 0, again.stdout


# ----------------------------------------------------------------------------- the full command list
def _help(command: str | None = None) -> str:
    argv = [sys.executable, "-m", "placer.cli", *([command] if command else []), "--help"]
    return subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, check=True, timeout=120).stdout


def test_every_flag_docs_commands_shows_exists():
    text = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
    rows = [line.split(" | ")[0] for line in text.splitlines() if line.startswith("| `placer ")]
    listed = {name for row in rows for name in re.findall(r"`placer ([a-z][a-z-]*)", row)}
    commands = {line.split()[0] for line in _help().split("Commands:", 1)[1].splitlines() if line.startswith("  ")}
    assert listed == commands
    helps: dict[str, str] = {}
    for row in rows:
        for command, usage in re.findall(r"`placer ([a-z][a-z-]*)([^`]*)`", row):
            out = helps.setdefault(command, _help(command))
            for flag in re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", usage):
                assert re.search(rf"(?<![\w-]){re.escape(flag)}\b", out), f"placer {command} has no {flag}"
