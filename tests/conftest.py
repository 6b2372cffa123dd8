"""Shared fixtures: run the CLI in-process and capture what a user would see."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os

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


# The optional extras (pyproject's [project.optional-dependencies]): the modules each brings, and how to
# install it. A test that needs one carries its marker (@pytest.mark.hf, .runtimes, .ray) and is skipped
# with this reason when a module is missing, unless PLACER_REQUIRE_EXTRAS names the extra (.ci/run sets
# "hf,runtimes,ray"): then it fails, so CI cannot skip a path by accident.
EXTRAS = {
    "hf": (("torch", "transformers"), "pip install -e '.[hf]'"),
    "runtimes": (("torch", "transformers", "megatron.core"), "pip install torch==2.13.0 -e '.[runtimes]'"),
    "ray": (("ray",), "pip install -e '.[ray]'"),
}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:          # a parent package missing (megatron for megatron.core)
        return False


def require_extra(name: str) -> None:
    """Skip the running test (or fail it, under PLACER_REQUIRE_EXTRAS) when extra ``name`` is missing."""
    modules, install = EXTRAS[name]
    missing = [m for m in modules if not _installed(m)]
    if not missing:
        return
    reason = f"needs the {name} extra ({', '.join(missing)} not installed): {install}"
    if name in os.environ.get("PLACER_REQUIRE_EXTRAS", "").split(","):
        pytest.fail(f"PLACER_REQUIRE_EXTRAS names {name}, but it {reason}")
    pytest.skip(reason)


def pytest_runtest_setup(item):
    for name in EXTRAS:
        if item.get_closest_marker(name) is not None:
            require_extra(name)


@pytest.fixture
def no_ray(monkeypatch):
    """``import ray`` fails for the test, as on a machine without the ``ray`` extra."""
    import builtins

    real_import = builtins.__import__

    def blocked(name, *a, **k):
        if name == "ray":
            raise ImportError("no ray")
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", blocked)


@pytest.fixture(scope="session")
def local_ray():
    """One local Ray instance for every Ray test (2 CPUs, no dashboard), shut down when the session ends.

    The backends join an instance that is already running and leave it up, so each test pays for
    tasks, not for starting Ray. A test that asks for it is marked ``ray`` (skipped without Ray).
    """
    require_extra("ray")
    import ray

    if ray.is_initialized():       # started by a caller of the test session: use it, leave it running
        yield ray
        return
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=256 * 2**20)
    try:
        yield ray
    finally:
        ray.shutdown()
