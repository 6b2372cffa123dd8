"""The one traffic flag set (placer.cli.traffic_options) on every command: --traffic FILE and its
errors, --trace, --isl/--osl forms, the capacity they reserve, the default shape in --help."""

import json
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parents[1] / "fixtures" / "traces"
SMALL = ["llama-3.1-8b", "-H", "h100", "--racks", 1]
COMMANDS = ("solve", "simulate", "compare", "frontier", "sweep", "plan")


def _line(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("traffic: "))


@pytest.fixture(scope="module")
def mapping(tmp_path_factory, run_cli):
    path = tmp_path_factory.mktemp("traffic") / "m.json"
    code, _, err = run_cli(["solve", *SMALL, "--tp", 1, "--context", "4k", "--concurrency", 4, "-q", "-o", path])
    assert code == 0, err
    return path


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_takes_the_same_traffic_flags_and_states_the_default(run_cli, command):
    code, text, _ = run_cli([command, "--help"])
    assert code == 0
    for flag in ("--isl", "--osl", "--output-tokens", "--cached-prompt", "--trace", "--traffic"):
        assert flag in text, (command, flag)
    assert "8k" in text and "1k" in text        # the default shape, stated


@pytest.mark.parametrize("body, field", [
    ("isl: 8k\nprompt: 4k\n", "prompt"),
    ("isl: 8k\nosl: [1, 2]\n", "osl"),
    ("cached_prompt: 150%\n", "cached_prompt"),
    ("rate: -1\n", "rate"),
    ("concurrency: many\n", "concurrency"),
    ("- isl\n", "(whole file)"),
])
def test_a_bad_traffic_file_is_one_line_naming_the_file_and_field(run_cli, mapping, tmp_path, body, field):
    bad = tmp_path / "traffic.yaml"
    bad.write_text(body)
    out = tmp_path / "out.json"
    for args in (["simulate", mapping], ["solve", *SMALL, "--tp", 1, "-o", out]):
        code, text, err = run_cli([*args, "--traffic", bad])
        assert code == 2, err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and str(bad) in lines[0] and f": {field}:" in lines[0], lines
        assert "Traceback" not in err and not out.exists()


def test_a_traffic_file_sets_the_fields_and_flags_beside_it_win(run_cli, mapping, tmp_path):
    f = tmp_path / "traffic.yaml"
    f.write_text("isl: 1k\nosl: 32\ncached_prompt: 50%\nconcurrency: 2\n")
    code, text, err = run_cli(["simulate", mapping, "--traffic", f])
    assert code == 0, err
    assert _line(text) == ("traffic: closed loop of 2 live requests (6 requests: at least 3 per user), "
                           "each a 1,024-token prompt (50% cached) then 32 output tokens")
    code, text, err = run_cli(["simulate", mapping, "--traffic", f, "--osl", 16])
    assert code == 0, err
    assert _line(text).endswith("each a 1,024-token prompt (50% cached) then 16 output tokens")


def test_distributions_and_the_older_spellings(run_cli, mapping):
    code, text, err = run_cli(["simulate", mapping, "--isl", "uniform:512-1k", "--osl", "lognormal:64,0.5",
                               "--max-live", 4, "--requests", 4])
    assert code == 0, err
    assert _line(text).endswith("each a prompt of uniform 512-1,024 tokens (0 cached) then lognormal "
                                "(median 64, sigma 0.5) output tokens")
    code, same, err = run_cli(["simulate", mapping, "--output-tokens", 32, "--arrival-rate", 5, "--duration", 1])
    code2, other, err2 = run_cli(["simulate", mapping, "--osl", 32, "--rate", 5, "--duration", 1])
    assert code == code2 == 0, err + err2
    assert _line(same) == _line(other) and _line(same).startswith("traffic: open Poisson arrivals at 5 requests/s")
    code, _, err = run_cli(["simulate", mapping, "--output-tokens", 32, "--osl", 16])
    assert code == 2 and "--output-tokens" in err and "--osl" in err


def test_a_trace_drives_arrivals_or_under_a_live_cap_gives_lengths(run_cli, mapping):
    trace = FIXTURES / "burstgpt_sample.csv"
    code, text, err = run_cli(["simulate", mapping, "--trace", trace, "--json"])
    assert code == 0, err
    doc = json.loads(text)
    assert doc["requests"] == 38 and doc["traffic"]["shape"] == "trace"
    assert "burstgpt_sample.csv (burstgpt, 38 requests" in doc["traffic"]["text"]
    code, text, err = run_cli(["simulate", mapping, "--trace", trace, "--max-live", 2, "--requests", 2])
    assert code == 0, err
    assert _line(text).startswith("traffic: closed loop of 2 live requests") and "lengths from the trace" in _line(text)


def test_isl_and_osl_reserve_the_longest_request_unless_context_is_given(run_cli):
    code, text, err = run_cli(["plan", *SMALL, "-n", 4, "--isl", "32k", "--osl", "1k", "-q", "--json"])
    assert code == 0, err
    assert json.loads(text)["workload"]["context_tokens"] == 33 * 1024
    code, text, err = run_cli(["plan", *SMALL, "-n", 4, "--isl", "32k", "--osl", "1k", "--context", "64k", "-q",
                               "--json"])
    assert code == 0, err
    assert json.loads(text)["workload"]["context_tokens"] == 64 * 1024
    # a lognormal prompt reserves its 99th percentile (8k x e^(2.326 x 0.5) = 26,215) plus the output
    code, text, err = run_cli(["plan", *SMALL, "-n", 4, "--isl", "lognormal:8k,0.5", "--osl", 1000, "-q", "--json"])
    assert code == 0, err
    assert json.loads(text)["workload"]["context_tokens"] == pytest.approx(26215 + 1000, abs=2)


def test_plan_at_a_rate_and_a_disaggregated_solve_state_their_traffic(run_cli):
    code, text, err = run_cli(["solve", "llama-3.1-70b", "-H", "h200", "--context", "8k", "--disagg",
                               "--max-ttft-ms", 2000, "--max-itl-ms", 50, "--rate", 2, "--isl", "4k", "--osl", 256,
                               "--threads", 1, "--time-limit", 20, "-q"])
    assert code in (0, 1), err
    assert _line(text) == ("traffic: open Poisson arrivals at 2 requests/s, each a 4,096-token prompt (0 cached) "
                           "then 256 output tokens")


def test_rate_outside_a_rate_plan_is_refused(run_cli):
    code, _, err = run_cli(["solve", *SMALL, "--rate", 2])
    assert code == 2 and "--rate" in err and "--disagg" in err
    code, _, err = run_cli(["compare", *SMALL, "--degrees-only", "--rate", 2])
    assert code == 2 and "--rate" in err
