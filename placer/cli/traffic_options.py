"""The traffic flags, defined once: ``--isl``, ``--osl`` (``--output-tokens`` its older name),
``--cached-prompt``, ``--rate``, ``--trace``, ``--traffic FILE`` (and, where a command has them,
``--context-dist`` and ``--decode-only``). :func:`traffic_options` adds them to a command and
hands it one :class:`TrafficArgs` as ``traffic``; the command passes its :class:`Traffic` on.

What speeds assume when none is given (the standard shape): :data:`DEFAULT_TEXT`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from pathlib import Path

import click

from placer.simulate.arguments import STANDARD_OUTPUT, STANDARD_PROMPT, Traffic, parse_cached, resolve_lengths
from placer.simulate.contexts import parse_context_dist
from placer.simulate.traces import Trace, read_trace
from placer.specs.errors import InvalidSpec
from placer.specs.spec_io import load_yaml_or_json, read_text
from placer.specs.units import parse_tokens

__all__ = ["traffic_options", "TrafficArgs", "read_traffic_file", "DEFAULT_TEXT", "FILE_FIELDS",
           "reserved_context"]

DEFAULT_TEXT = (f"Default traffic (no flag given): a {STANDARD_PROMPT // 1024}k-token prompt then "
                f"{STANDARD_OUTPUT // 1024}k output tokens (the 8k/1k the public serving benchmarks run), "
                f"the prompt cut so that prompt + output fit --context, closed loop at the live requests the "
                f"placement holds; a model spec's default_traffic replaces it (kimi-k3: agent turns over its "
                f"256k context, 86% of each prompt in the prefix cache).")
# the fields a --traffic FILE may set (the flags of the same names)
FILE_FIELDS = ("isl", "osl", "cached_prompt", "concurrency", "rate", "trace", "decode_only", "context_dist")
LONGEST_PERCENTILE = 99       # a lognormal length reserves its 99th percentile


@dataclass(frozen=True)
class TrafficArgs:
    """The traffic flags of one command: ``traffic`` (only what was given; the rest resolves per
    instance), ``concurrency`` (a --traffic file's, when the command's own flag is not given) and
    ``given`` (whether any length, cache, rate or trace flag was)."""

    traffic: Traffic
    concurrency: int | None = None
    given: bool = False

    @property
    def rate(self) -> float | None:
        return self.traffic.arrival_rate

    @property
    def decode_only(self) -> bool:
        return self.traffic.decode_only

    def output_tokens(self, default: int | None = None) -> int | None:
        """Output tokens as one number (a distribution's mean, rounded; a trace's mean), else ``default``."""
        out = self.traffic.output_tokens
        if out is None and self.traffic.replay is not None:
            rows = self.traffic.replay.rows
            return max(1, round(sum(r.output_tokens for r in rows) / len(rows)))
        if out is None:
            return default
        return out if isinstance(out, int) else max(1, round(out.mean))

    def prompt_tokens(self) -> int | None:
        p = self.traffic.prompt_tokens
        return p if p is None or isinstance(p, int) else max(1, round(p.mean))

    @property
    def cached_tokens(self) -> int | None:
        return self.traffic.cached_prompt_tokens

    def sim(self) -> dict:
        """The given fields as simulation options (:func:`placer.simulate.arguments.split_options` names)."""
        t = self.traffic
        names = ("prompt_tokens", "output_tokens", "cached_prompt_tokens", "cached_share", "replay", "context_dist",
                 "arrival_rate")
        out = {n: getattr(t, n) for n in names if getattr(t, n) is not None}
        if t.closed_loop:
            out["closed_loop"] = True
        if t.decode_only:
            out["decode_only"] = True
        return out

    @property
    def closed(self) -> Traffic:
        """The traffic as a closed loop at the command's concurrency serves it: a trace gives its
        lengths only (speed floors, the per-degree table and frontier points are closed loops)."""
        t = self.traffic
        return t if t.replay is None else replace(t, closed_loop=True, arrival_rate=None)

    def resolved(self, model, context_tokens: int) -> tuple[Traffic, int, int]:
        """(the traffic with every length filled in for ``model`` at ``context_tokens``, a trace
        read as a closed loop's lengths; its mean prompt and mean output tokens, rounded)."""
        t, shapes = resolve_lengths(self.closed, context_tokens, getattr(model, "default_traffic", None) or {})
        out = shapes.mean_output
        return t, max(1, round(shapes.mean_context - out)), max(1, round(out))

    def longest(self) -> int | None:
        """The longest request the flags describe (prompt + output tokens; a lognormal's 99th
        percentile), None when they leave a length open (the reserve then stays the workload's)."""
        t = self.traffic
        if t.replay is not None:
            return t.replay.longest
        if t.prompt_tokens is None or t.output_tokens is None:
            return None
        return int(_top(t.prompt_tokens) + _top(t.output_tokens))


def _top(d) -> float:
    return float(d) if isinstance(d, int) else d.percentile(100 if d.kind != "lognormal" else LONGEST_PERCENTILE)


def reserved_context(context, traffic: TrafficArgs):
    """The context a placement reserves per request: ``--context`` when given, else the traffic's
    longest request when the flags fix it, else None (the workload's default)."""
    if context is not None:
        return context
    return traffic.longest()


def _length(value, flag: str):
    """A length flag: tokens (8k) or a distribution (uniform:LO-HI, lognormal:MEDIAN,SIGMA)."""
    if value is None:
        return None
    text = str(value).strip()
    if ":" in text:
        d = parse_context_dist(text, flag.lstrip("-"))
        return int(d.values[0]) if d.kind == "fixed" else d
    try:
        n = parse_tokens(text)
    except (ValueError, TypeError, InvalidSpec):
        raise InvalidSpec(flag, flag.lstrip("-"), f"{value!r}: tokens (8k) or a distribution (uniform:LO-HI, "
                                                  f"lognormal:MEDIAN,SIGMA)") from None
    if n < 1:
        raise InvalidSpec(flag, flag.lstrip("-"), "must be at least 1 token")
    return n


def read_traffic_file(path: str) -> dict:
    """A --traffic YAML file's fields (:data:`FILE_FIELDS`); an unknown field, or a file that is not
    a mapping, is an :class:`InvalidSpec` naming the file and the field."""
    p = Path(path)
    if not read_text(p).strip():
        return {}
    data, _text = load_yaml_or_json(p)
    if not isinstance(data, dict):
        raise InvalidSpec(str(p), None, "must be a mapping of traffic fields (" + ", ".join(FILE_FIELDS) + ")")
    for key in data:
        if key not in FILE_FIELDS:
            raise InvalidSpec(str(p), str(key), "unknown field (a traffic file has " + ", ".join(FILE_FIELDS) + ")")
    return data


def _from_file(path: str | None) -> dict:
    if path is None:
        return {}
    data = read_traffic_file(path)
    where = str(path)
    out = {}
    for key, value in data.items():
        if value is None:
            continue
        try:
            if key == "concurrency":
                if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                    raise ValueError("a whole number >= 1 of live requests")
            elif key == "rate":
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                    raise ValueError("a positive number of requests per second")
            elif key == "decode_only" and not isinstance(value, bool):
                raise ValueError("true or false")
            elif key == "trace":
                value = str(Path(path).parent / str(value)) if not Path(str(value)).is_absolute() else str(value)
            elif key == "isl" or key == "osl":
                _length(value, key)
            elif key == "cached_prompt":
                parse_cached(value, key)
            elif key == "context_dist":
                parse_context_dist(str(value))
        except (ValueError, InvalidSpec) as exc:
            raise InvalidSpec(where, key, getattr(exc, "message", None) or str(exc)) from None
        out[key] = value
    return out


def _build(kw: dict, with_rate: bool) -> TrafficArgs:
    """The :class:`TrafficArgs` of a command's traffic flags ``kw`` (popped), a --traffic file's
    fields under the flags given beside it."""
    file = _from_file(kw.pop("traffic_file", None))
    output_alias = kw.pop("output_tokens", None)
    osl = kw.pop("osl", None)
    if output_alias is not None and osl is not None and str(output_alias) != str(osl):
        raise InvalidSpec("--output-tokens", "output_tokens", "is the older name of --osl: give one of them")
    isl = _length(kw.pop("isl", None) or file.get("isl"), "--isl")
    osl = _length(osl or output_alias or file.get("osl"), "--osl")
    cached = kw.pop("cached_prompt", None)
    cached = cached if cached is not None else file.get("cached_prompt")
    share, tokens = (None, None) if cached is None else parse_cached(cached, "cached_prompt")
    if share is not None:
        tokens = None
    trace_path = kw.pop("trace_file", None) or file.get("trace")
    trace: Trace | None = None if trace_path is None else read_trace(trace_path)
    rate = kw.pop("rate", None) if with_rate else None
    rate = rate if rate is not None else file.get("rate")
    dist = kw.pop("context_dist", None) or file.get("context_dist")
    decode_only = bool(kw.pop("decode_only", False) or file.get("decode_only"))
    concurrency = file.get("concurrency")
    if trace is not None and isl is not None:
        raise InvalidSpec("--isl", "isl", "a trace gives each request's prompt; give --isl or --trace")
    if dist is not None and isl is not None:
        raise InvalidSpec("--context-dist", "context_dist", "a total context's distribution; give it or --isl")
    t = Traffic(prompt_tokens=isl, output_tokens=osl, cached_prompt_tokens=tokens, cached_share=share,
                replay=trace, arrival_rate=rate, context_dist=dist, decode_only=decode_only)
    given = any(x is not None for x in (isl, osl, cached, trace, rate, dist)) or decode_only
    return TrafficArgs(t, concurrency, given)


def traffic_options(*, rate: bool = True, context_dist: bool = False, decode_only: bool = False,
                    osl_default: str = "the standard 1k"):
    """The traffic flags on a command (``rate``, ``context_dist``, ``decode_only``: whether it takes
    those too); the command receives ``traffic`` (:class:`TrafficArgs`) in their place."""

    def deco(f):
        @functools.wraps(f)
        def wrapper(*args, **kw):
            kw["traffic"] = _build(kw, rate)
            return f(*args, **kw)

        opts = [
            click.option("--isl", default=None, metavar="TOKENS|DIST",
                         help="Prompt tokens per request: a number (8k) or a distribution, uniform:LO-HI or "
                              "lognormal:MEDIAN,SIGMA (ln of the count normal with median MEDIAN and standard "
                              f"deviation SIGMA) (default: {STANDARD_PROMPT:,}, at most --context less the output)."),
            click.option("--osl", default=None, metavar="TOKENS|DIST",
                         help=f"Output tokens per request, the same forms as --isl (default: {osl_default})."),
            click.option("--output-tokens", default=None, metavar="N",
                         help="The older name of --osl."),
            click.option("--cached-prompt", "cached_prompt", default=None, metavar="TOKENS|SHARE",
                         help="Of every prompt, this many leading tokens (8k) or this share (90%) are a "
                              "prefix-cache hit (an agent's repeated context): only the rest is prefilled "
                              "(default 0)."),
            click.option("--trace", "trace_file", type=click.Path(dir_okay=False), default=None, metavar="FILE",
                         help="Replay a trace: Mooncake JSONL, BurstGPT CSV or arrival_s,input_tokens,"
                              "output_tokens[,cached_tokens] CSV; its timestamps drive arrivals (scaled to "
                              "--rate), or under --concurrency its lengths are drawn in a closed loop."),
            click.option("--traffic", "traffic_file", type=click.Path(dir_okay=False), default=None,
                         metavar="FILE", help="A YAML file of traffic fields (" + ", ".join(FILE_FIELDS) + "); "
                                              "flags given beside it win."),
        ]
        if rate:
            opts.append(click.option("--rate", type=click.FloatRange(0, min_open=True), default=None, metavar="R",
                                     help="Open Poisson arrivals at R requests/s (default: a closed loop at the "
                                          "concurrency)."))
        if context_dist:
            opts.append(click.option("--context-dist", default=None,
                                     help="The older form: a total context per request drawn from fixed:256k, "
                                          "uniform:64k-256k, lognormal:MEDIAN,SIGMA or choice:8k,32k,256k, its "
                                          "last --osl tokens generated."))
        if decode_only:
            opts.append(click.option("--decode-only", is_flag=True,
                                     help="Leave prefill out: every request's prompt is in the KV cache already, "
                                          "all arrive at once (no TTFT)."))
        for opt in reversed(opts):
            wrapper = opt(wrapper)
        return wrapper

    return deco
