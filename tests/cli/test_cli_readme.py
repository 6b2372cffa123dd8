"""The README's first minute and its Commands section, against the real CLI."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

from placer.specs.catalog import project_root

README = (project_root() / "README.md").read_text(encoding="utf-8")


def _help_commands(run_cli) -> set[str]:
    code, out, _ = run_cli(["--help"])
    assert code == 0
    section = out.split("Commands:", 1)[1]
    return {line.split()[0] for line in section.splitlines() if line.startswith("  ") and line.split()}


def _readme_rows() -> list[str]:
    """The first cell of every row of the table in the README's Commands section."""
    section = README.split("\n## Commands\n", 1)[1].split("\n## ", 1)[0]
    return [line.split(" | ")[0] for line in section.splitlines() if line.startswith("| `placer ")]


def test_readme_commands_section_lists_exactly_the_commands_of_help(run_cli):
    listed = {name for cell in _readme_rows() for name in re.findall(r"`placer ([a-z][a-z-]*)", cell)}
    assert listed == _help_commands(run_cli)


def test_every_flag_the_readme_shows_exists(run_cli):
    for cell in _readme_rows():
        for command, usage in re.findall(r"`placer ([a-z][a-z-]*)([^`]*)`", cell):
            code, out, _ = run_cli([command, "--help"])
            assert code == 0, command
            for flag in re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", usage):
                assert re.search(rf"(?<![\w-]){re.escape(flag)}\b", out), f"placer {command} has no {flag}"


def test_the_first_command_works_as_written_and_fits_a_screen(tmp_path):
    block = README.split("```bash\n", 1)[1].split("```", 1)[0]
    steps = [step.strip() for line in block.splitlines() for step in line.split("&&")]
    assert steps == ["pip install -e .", "placer solve kimi-k3 --hardware wse-3t",
                     'pip install -e ".[test]"', "pytest -q"]
    argv = shlex.split(steps[1])[1:]
    # from an empty folder, as a new user would after installing: nothing may appear there
    proc = subprocess.run([sys.executable, "-m", "placer.cli", *argv], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env={"PYTHONPATH": str(project_root()), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) <= 12
    assert lines[0].startswith("kimi-k3 on wse-3t, contiguous (layer), method cpsat: ")
    assert lines[1].startswith("workload: context 256k")
    assert lines[2].startswith("devices 70 (lower bound 70), concurrency 184 (ceiling 184), hop latency ")
    assert lines[-1] == "mapping not written (-o FILE writes it)"
    assert list(tmp_path.iterdir()) == []
