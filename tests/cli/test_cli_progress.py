"""Long jobs show a progress bar on stderr (points done, failures, ETA) when a person watches it, and
nothing when stderr is not a terminal or with --quiet."""

from __future__ import annotations

import json
import re

import pytest

import placer.cli.common as common
from placer.planning.studies.compare import COMPARE_ROWS
from placer.specs.catalog import project_root

OK = project_root() / "tests" / "bad_inputs" / "ok"
TINY, TINYHW = OK / "tiny.yaml", OK / "tinyhw.yaml"
# 4 points; typepack places only in free mode, so the two contiguous points fail
SWEEP = ["sweep", TINY, "-H", TINYHW, "--concurrency", "1,2", "--mode", "contiguous,free", "--method", "typepack",
         "--jobs", "1", "--json"]


def _last_frame(err: str) -> str:
    """The bar as it was last drawn (tqdm redraws the line after a carriage return)."""
    return [f for f in re.split(r"[\r\n]", err) if f.strip()][-1]


@pytest.fixture
def terminal(monkeypatch):
    monkeypatch.setattr(common, "stderr_is_terminal", lambda: True)


def test_sweep_bar_counts_points_and_failures(run_cli, terminal):
    code, out, err = run_cli(SWEEP)
    assert code == 0
    rows = json.loads(out)["rows"]
    failed = sum(r["status"] in ("error", "unknown") for r in rows)
    assert (len(rows), failed) == (4, 2)
    last = _last_frame(err)
    assert last.startswith("sweep 100%|") and "| 4/4 points [" in last, last
    assert last.endswith(f", {failed} failed"), last
    assert re.search(r"\[\d\d:\d\d<\d\d:\d\d, ", last), last           # elapsed < remaining (the ETA)


def test_no_bar_unless_a_terminal_watches_or_with_quiet(run_cli, monkeypatch):
    code, out, err = run_cli(SWEEP)
    assert code == 0 and err == ""
    monkeypatch.setattr(common, "stderr_is_terminal", lambda: True)
    code, out, err = run_cli([*SWEEP, "--quiet"])
    assert code == 0 and err == "" and len(json.loads(out)["rows"]) == 4


def test_plan_and_compare_show_progress(run_cli, terminal, write):
    code, out, err = run_cli(["plan", TINY, "-H", TINYHW, "-n", "1000", "--json"])
    assert code == 0
    tried = len(json.loads(out)["rows"])
    last = _last_frame(err)
    assert f" {tried} replica counts [" in last and last.endswith(", 0 failed"), last
    code, out, err = run_cli(["compare", TINY, "-H", TINYHW, "--time-limit", "2", "--json"])
    assert code == 0
    rows = json.loads(out)["rows"]
    last = _last_frame(err)
    assert f"| {len(rows)}/{len(rows)} rows [" in last, last
    assert last.startswith(f"compare: {rows[-1]['method']} / {rows[-1]['mode']} 100%|"), last
    code, _, err = run_cli(["compare", TINY, "-H", TINYHW, "--time-limit", "2", "--quiet"])
    assert code == 0 and err == ""


def test_compare_logs_one_line_per_row_without_a_terminal(run_cli):
    code, _, err = run_cli(["compare", TINY, "-H", TINYHW, "--time-limit", "2"])
    assert code == 0
    lines = err.splitlines()
    assert lines[0] == "solving typepack / free ..." and lines[-1] == "solving bound / split ..."
    assert lines == [f"solving {method} / {mode} ..." for method, mode in COMPARE_ROWS] and len(lines) == 11


def test_solve_quiet_drops_the_progress_lines(run_cli):
    code, _, err = run_cli(["solve", "kimi-k3", "-H", "wse-3t", "--threads", "1"])
    assert code == 0 and "cpsat, hop latency level:" in err
    code, _, err = run_cli(["solve", "kimi-k3", "-H", "wse-3t", "--threads", "1", "--quiet"])
    assert code == 0 and err == ""
