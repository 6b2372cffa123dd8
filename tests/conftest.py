"""Shared fixtures: run the CLI in-process and capture what a user would see."""

from __future__ import annotations

import contextlib
import io

import pytest

from placer.cli import main


def run_cli(args) -> tuple[int, str, str]:
    """Run ``placer ARGS`` in-process; returns (exit code, stdout, stderr).

    ``main`` turns every error into an exit code, so an exception escaping here is itself a bug
    and is left to fail the test.
    """
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main([str(a) for a in args])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(name="run_cli", scope="session")
def run_cli_fixture():
    """The :func:`run_cli` helper as a fixture: ``code, out, err = run_cli(["inspect", "kimi-k3"])``."""
    return run_cli


@pytest.fixture
def write(tmp_path):
    """``write("name.yaml", text_or_bytes)`` -> path of a new file in the test's temporary folder."""
    def _write(name: str, content: str | bytes):
        path = tmp_path / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        return path
    return _write
