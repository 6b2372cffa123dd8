"""Every speed figure says which traffic produced it: solve, simulate and compare state the same
traffic for the same flags, in their text and their JSON."""

from __future__ import annotations

import json

SMALL = ["llama-3.1-8b", "-H", "h100", "--concurrency", 4, "--context", 2048]


def _line(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("traffic: "))


def test_solve_simulate_and_compare_state_the_same_traffic(run_cli, tmp_path):
    out = tmp_path / "p.json"
    flags = ["--output-tokens", 64, "--cached-prompt", 1024]
    code, text, err = run_cli(["solve", *SMALL, "--min-user-tps", 10, "--tp", 1, "--method", "dp", "-q", "-o", out,
                               *flags])
    assert code == 0, err
    live = json.loads(out.read_text())["serving"]["live_per_replica"]
    solved = _line(text)
    assert solved == (f"traffic: closed loop of {live} live requests ({3 * live} requests: at least 3 per user), "
                      "each a 1,984-token prompt (1,024 cached) then 64 output tokens (per replica)")
    code, js, err = run_cli(["solve", *SMALL, "--min-user-tps", 10, "--tp", 1, "--method", "dp", "-q", "--json",
                             *flags])
    assert code == 0, err
    assert json.loads(js)["speed_target"]["traffic"]["text"] + " (per replica)" == solved

    # the mapping simulated at the load it was planned for: the same traffic, word for word
    code, text, err = run_cli(["simulate", out, "--cached-prompt", 1024])
    assert code == 0, err
    assert _line(text) + " (per replica)" == solved
    code, js, err = run_cli(["simulate", out, "--cached-prompt", 1024, "--json"])
    assert code == 0, err
    doc = json.loads(js)["traffic"]
    assert doc["text"] + " (per replica)" == solved
    assert (doc["shape"], doc["live_requests"], doc["prompt_tokens"], doc["cached_prompt_tokens"],
            doc["output_tokens"]) == ("closed_loop", live, 1984, 1024, 64)

    # compare's per-degree table: each row at its own load, the request the same
    code, text, err = run_cli(["compare", *SMALL, "--tp", 1, "--degrees-only", "--time-limit", 5, "-q", *flags])
    assert code == 0, err
    assert "each request prefills its prompt then decodes 64 tokens" in text
    assert _line(text) == ("traffic: closed loop at each row's load: one user alone, then its live requests "
                           "(at least 3 requests per user), each a 1,984-token prompt (1,024 cached) then 64 "
                           "output tokens")
    code, js, err = run_cli(["compare", *SMALL, "--tp", 1, "--degrees-only", "--time-limit", 5, "-q", "--json",
                             *flags])
    assert code == 0, err
    assert json.loads(js)["traffic"]["text"] == _line(text)


def test_simulate_explains_its_request_count_and_reads_its_distribution(run_cli, tmp_path):
    out = tmp_path / "p.json"
    code, _, err = run_cli(["solve", *SMALL, "--tp", 1, "--method", "dp", "-q", "-o", out])
    assert code == 0, err
    code, text, err = run_cli(["simulate", out, "--requests", 5, "--max-live", 5])
    assert code == 0, err
    assert text.splitlines()[1].startswith("15 requests")
    # the standard shape cut to the 2k context: half of it generated, the rest the prompt
    assert _line(text) == ("traffic: closed loop of 5 live requests (15 requests: at least 3 per user), "
                           "each a 1,024-token prompt (0 cached) then 1,024 output tokens")
    code, text, err = run_cli(["simulate", out, "--requests", 5, "--decode-only"])
    assert code == 0, err
    assert _line(text).startswith("traffic: decode only (prompts already in the cache), 5 live requests at once, ")
    code, text, err = run_cli(["simulate", out, "--arrival-rate", 5, "--duration", 1])
    assert code == 0, err
    assert _line(text).startswith("traffic: open Poisson arrivals at 5 requests/s for 1 s, ")
    for bad in ("lognormal:8k", "uniform:8k", "gamma:1:2"):
        code, text, err = run_cli(["simulate", out, "--context-dist", bad])
        assert code == 2 and "Traceback" not in err
        assert len(err.strip().splitlines()) == 1 and "--context-dist" in err


def test_simulate_compare_states_its_traffic(run_cli):
    code, text, err = run_cli(["simulate", "--compare", "llama-3.1-8b", "-H", "h100", "--modes", "contiguous",
                               "--context", 2048, "--time-limit", 5])
    assert code == 0, err
    assert _line(text) == ("traffic: closed loop at each mode's live cap (at least 3 requests per user), "
                           "each a 1,024-token prompt (0 cached) then 1,024 output tokens")


def test_sweep_states_the_traffic_of_its_simulated_columns(run_cli):
    args = ["sweep", "llama-3.1-8b", "-H", "h100", "--context", "2k", "--concurrency", 4, "--mode", "contiguous",
            "--simulate", "--time-limit", 3, "-q"]
    code, text, err = run_cli(args)
    assert code == 0, err
    assert _line(text) == ("traffic: closed loop at each row's concurrency (at least 3 requests per user), "
                           "each a prompt of min(8,192, the context less the output) tokens (0 cached) then "
                           "min(1,024, half the context) output tokens")
    code, js, err = run_cli([*args, "--json"])
    assert code == 0, err
    assert json.loads(js)["traffic"]["text"] == _line(text)


def test_compare_decode_only_states_it_and_refuses_what_needs_prefill(run_cli):
    args = ["compare", *SMALL, "--tp", 1, "--degrees-only", "--time-limit", 5, "-q", "--output-tokens", 64,
            "--decode-only"]
    code, text, err = run_cli(args)
    assert code == 0, err
    assert "simulated: each request decodes 64 tokens" in text
    assert _line(text) == ("traffic: decode only (prompts already in the cache), each row's load: one user alone, "
                           "then its live requests at once, each a 1,984-token prompt already in the cache then "
                           "64 output tokens")
    code, js, err = run_cli([*args, "--json"])
    assert code == 0, err
    doc = json.loads(js)
    assert doc["traffic"]["shape"] == "decode_only" and doc["degrees"][0]["ttft_p99_us"] is None
    for extra, flag in ((["--cached-prompt", 1024], "--cached-prompt"), (["--max-ttft-ms", 100], "--max-ttft-ms")):
        code, _, err = run_cli([*args, *extra])
        assert code == 2 and flag in err and "--decode-only" in err
