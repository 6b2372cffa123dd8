"""One deadline for every phase of a solve (issue 10, item 5).

No test here measures time: each gives the code an already-expired deadline (or a Ctrl-C) and
checks what it then does (start no probe, build no large model, claim no proof), which is what
keeps the wall time within the limit. The wall-time figures are in benchmarks/README.md.
"""

from __future__ import annotations

import math
import sys
import time

import pytest
from dirs import BENCHMARKS, OK_INPUTS, ROOT

from placer.algorithms import place
from placer.algorithms.deadline import (
    Deadline,
    DeadlineReached,
    clear_interrupt,
    interrupted,
    note_interrupt,
)
from placer.algorithms.entry import largest_feasible_concurrency
from placer.planning.studies.explain import diagnose
from placer.problem.placement import Status

sys.path.insert(0, str(BENCHMARKS))
from generators import sparse_ring_instance  # noqa: E402


def _passed() -> Deadline:
    return Deadline(time.monotonic() - 1.0)


def test_deadline_arithmetic():
    assert Deadline().remaining() == math.inf and not Deadline().expired()
    assert Deadline.after(None).end == math.inf
    assert _passed().expired() and _passed().remaining() == 0.0
    d = Deadline.after(1000)
    assert 0 < d.remaining() <= 1000
    assert d.within(5).end <= d.end and d.within(5).remaining() <= 5
    assert _passed().within(100).expired()                 # a phase's cap never extends the deadline
    assert Deadline.of(None, 3).remaining() <= 3 and Deadline.of(d) is d
    assert d.budget(2.0) <= 2.0 and _passed().budget(2.0) == 0.0
    with pytest.raises(DeadlineReached):
        _passed().check()
    with pytest.raises(ValueError):
        Deadline.after(-1)


def test_ctrl_c_expires_every_deadline():
    d = Deadline.after(1000)
    try:
        note_interrupt()
        assert interrupted() and d.expired() and Deadline().remaining() == 0.0
    finally:
        clear_interrupt()
    assert not interrupted() and not d.expired()


def test_no_concurrency_probe_after_ctrl_c():
    """The concurrency search after an infeasible request starts no probe once Ctrl-C was pressed:
    every probe is undecided, so the figure is not claimed as proven."""
    inst = sparse_ring_instance(12, 30, 0, mode="free")
    try:
        note_interrupt()
        value, proven = largest_feasible_concurrency(inst.with_concurrency(10**6), budget=100)
    finally:
        clear_interrupt()
    assert not proven


def test_explanation_past_the_deadline_runs_no_probe():
    """With the shared deadline already spent by the solve, the explanation keeps its direct checks
    and runs no solver probe: what it cannot decide it does not claim."""
    # too many layers for the ring: the fleet bound rules it out (a direct check, no solver)
    e = diagnose(sparse_ring_instance(12, 60, 0), deadline=_passed())
    assert any("devices are needed" in c for c in e.culprits)
    # nothing a direct check sees: no probe, no core, and no claim that nothing fits
    e = diagnose(sparse_ring_instance(12, 30, 0), deadline=_passed())
    assert e.core == () and "time limit was reached" in e.core_note
    assert any("not decided" in n for n in e.notes)
    assert e.max_concurrency is None and "largest feasible concurrency" not in e.text()
    assert "not even 1 token" not in e.text()


def test_latency_model_past_the_deadline_claims_no_proof():
    """Free mode on a ring (no ultrametric, so the per-edge latency table is built): with the
    deadline passed the table is not built, and the wanted latency level is reported unproven
    rather than left out (which would make the result read as optimal)."""
    inst = sparse_ring_instance(20, 40, 0, mode="free")
    r = place(inst, "cpsat", time_limit=30, threads=1, deadline=_passed())
    assert r.feasible
    names = {lv.name: lv for lv in r.levels}
    assert "latency" in names and not names["latency"].proven
    assert r.status == Status.FEASIBLE and not r.proven_optimal


def test_an_earlier_ctrl_c_does_not_cut_a_later_solve_short():
    """place() forgets a Ctrl-C that stopped an earlier call (a notebook keeps one process)."""
    note_interrupt()
    try:
        r = place(sparse_ring_instance(12, 20, 0), "cpsat", time_limit=30, threads=1, objective="devices")
    finally:
        clear_interrupt()
    assert r.feasible and not r.interrupted
    assert r.levels[0].proven      # a ring: the walk's arcs prove the count, no search cut short


# ----------------------------------------------------------------------------- from the process's start
def test_the_process_start_is_before_now():
    """/proc/self/stat's start time, carried to the monotonic clock: this process began before this
    line ran (and, on Linux, it is known)."""
    from placer.algorithms.deadline import process_started

    started = process_started()
    if sys.platform.startswith("linux"):
        assert started is not None
    if started is not None:
        assert started <= time.monotonic()


def test_a_child_process_is_younger_than_the_wait_for_it():
    """A fresh interpreter's own age, read at its first line, is at most what its parent has waited
    since before starting it: the start is the process's, not some earlier point."""
    import subprocess

    code = ("import time\nfrom placer.algorithms.deadline import process_started\n"
            "s = process_started()\nprint(-1 if s is None else time.monotonic() - s)")
    before = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=ROOT).stdout
    waited = time.monotonic() - before
    age = float(out)
    if age >= 0:
        assert 0.0 <= age <= waited + 0.02      # one clock tick of /proc's resolution


def test_since_command_start_counts_from_the_recorded_start():
    from placer.algorithms.deadline import command_started, start_command

    try:
        start_command(1000.0)
        assert command_started() == 1000.0
        assert Deadline.since_command_start(30).end == 1030.0
        assert Deadline.since_command_start(None).end == math.inf
    finally:
        start_command()


def test_placer_solve_counts_its_limit_from_the_process_start(monkeypatch):
    """Run as a process (``main()`` with no arguments), ``placer solve --time-limit 30`` gives every
    phase one deadline 30 s after the process began, and ends through the fast exit."""
    from placer import cli
    from placer.algorithms import deadline as dl
    from placer.cli import solve_cmd

    seen = {}
    real = solve_cmd.plan

    def spy(model, fleet, workload, requirements, solver, **kw):
        seen["deadline"] = solver.deadline
        return real(model, fleet, workload, requirements, solver, **kw)

    def leave(code):
        seen["code"] = code
        raise SystemExit(code)

    ok = OK_INPUTS
    monkeypatch.setattr(dl, "process_started", lambda: 500.0)
    monkeypatch.setattr(solve_cmd, "plan", spy)
    monkeypatch.setattr(cli, "_leave", leave)
    monkeypatch.setattr(sys, "argv", ["placer", "solve", str(ok / "tiny.yaml"), "-H", str(ok / "tinyhw.yaml"),
                                      "--time-limit", "30", "--quiet"])
    try:
        with pytest.raises(SystemExit):
            cli.main()
    finally:
        dl.start_command()
    assert seen["deadline"].end == 530.0 and seen["code"] == 0


@pytest.mark.slow
def test_the_fast_exit_flushes_everything_through_a_pipe(tmp_path):
    """`placer solve --json -o FILE` as a process: the whole JSON arrives through the pipe, the file
    is written and the exit code is the command's, although the process skips the teardown."""
    import json
    import subprocess

    ok = OK_INPUTS
    out = tmp_path / "m.json"
    proc = subprocess.run([sys.executable, "-c", "from placer.cli import main; main()", "solve", str(ok / "tiny.yaml"),
                           "-H", str(ok / "tinyhw.yaml"), "--json", "--quiet", "-o", str(out)],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == json.loads(out.read_text())
    assert proc.stderr == f"wrote {out}\n"
    bad = subprocess.run([sys.executable, "-c", "from placer.cli import main; main()", "solve", "no-such-model",
                          "-H", str(ok / "tinyhw.yaml")], capture_output=True, text=True,
                         cwd=ROOT)
    assert bad.returncode == 2 and bad.stdout == "" and bad.stderr.startswith("error: no-such-model: model: ")
