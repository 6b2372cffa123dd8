"""The arguments of a simulation run: the requests it serves (:class:`Traffic`), how the server
batches and decodes them (:class:`Serving`) and the run's own settings (:class:`RunSettings`);
checked and resolved: counts, the context distribution, the speculation and the prefix-cache hit
a run takes from its instance when not given."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from placer.problem.instance import Instance
from placer.simulate.contexts import ContextDist, parse_context_dist
from placer.simulate.requests import Shapes
from placer.simulate.session_traffic import Sessions
from placer.simulate.traces import Trace
from placer.specs.errors import ARGUMENT, InvalidSpec
from placer.specs.units import parse_tokens, plural

__all__ = ["Traffic", "Serving", "RunSettings", "split_options", "DEFAULT_ROUNDS", "spec_of", "cached_prompt",
           "check_counts", "study_traffic", "resolve", "shortest_prompt", "traced_arrivals", "arrival_at",
           "resolve_lengths", "parse_cached", "STANDARD_PROMPT", "STANDARD_OUTPUT"]

# the standard shape when nothing says otherwise: the 8k prompt / 1k output the public serving
# benchmarks run (InferenceMAX's and NVIDIA's 8k/1k), the prompt cut so that prompt + output fit the
# context the placement reserves
STANDARD_PROMPT = 8192
STANDARD_OUTPUT = 1024

SCHEDULES = ("continuous", "micro-batch")
# Requests one decode step may batch, by serving runtime (None: only the KV reserve limits it).
# vllm: --max-num-seqs defaults to 256 (docs.vllm.ai, "Engine Arguments"); sglang: with
# --max-running-requests unset the limit follows the KV pool (sglang server_args.py), i.e. the
# reserve. Cerebras publishes no batch limit for its wafer serving stack.
RUNTIME_MAX_BATCH: dict[str, int | None] = {"vllm": 256, "sglang": None}
DEFAULT_RUNTIME = "vllm"

# closed loop: requests per user at least, so that a steady window exists between the first
# round's end (every user has finished one) and the last request's issue
DEFAULT_ROUNDS = 3


@dataclass(frozen=True)
class Traffic:
    """The requests a run serves (see :mod:`placer.simulate.des`): ``requests`` in all (default:
    the live-request cap), at most ``max_live`` live at once; each a prompt of ``prompt_tokens``
    (tokens, or a distribution :func:`~placer.simulate.contexts.parse_context_dist` reads) then
    ``output_tokens`` generated (the same forms), of which ``cached_prompt_tokens`` (or the share
    ``cached_share``) of the prompt is a prefix-cache hit (default the instance's); or, the older
    form, a total ``context`` (or ``context_dist``) whose last ``output_tokens`` are generated; or
    the lengths of a ``replay`` trace (:mod:`placer.simulate.traces`). Arrivals: a Poisson stream of
    ``arrival_rate`` per second for ``duration_s``; a trace's own timestamps (scaled to
    ``arrival_rate`` when given; with ``closed_loop`` the trace gives lengths only); else a closed
    loop of at least ``rounds`` requests per user; ``decode_only`` leaves prefill out.

    What is not given comes from the instance (the traffic a plan was made for, :attr:`Instance.traffic`),
    then the model spec's ``default_traffic``, then the standard shape (:data:`STANDARD_PROMPT` /
    :data:`STANDARD_OUTPUT`, capped so that prompt + output fit the reserved context):
    :func:`resolve`."""

    requests: int | None = None
    max_live: int | None = None
    output_tokens: int | str | ContextDist | None = None
    context: int | str | None = None
    context_dist: str | ContextDist | None = None
    arrival_rate: float | None = None
    duration_s: float | None = None
    rounds: int = DEFAULT_ROUNDS
    decode_only: bool = False
    cached_prompt_tokens: int | None = None
    prompt_tokens: int | str | ContextDist | None = None
    cached_share: float | None = None
    replay: Trace | None = None
    closed_loop: bool = False
    sessions: Sessions | None = None      # session traffic (placer.simulate.sessions runs it)

    @property
    def older_form(self) -> bool:
        """Lengths given as a total context (``context`` / ``context_dist``)."""
        return self.context is not None or self.context_dist is not None

    def _load(self, load: str) -> tuple[int | None, str]:
        """Live requests (None: not fixed here) and their words."""
        given = [n for n in (self.requests, self.max_live) if n is not None]
        if not given:
            return None, load
        return min(given), f"{min(given):,} live requests"

    def request_text(self) -> str:
        """What one request is: its prompt (of which cached) and its output tokens."""
        if self.replay is not None:
            return f"lengths{'' if self.cached_share is not None else ' and cached prefixes'} from the trace" + (
                f" ({self._cached()})" if self.cached_share is not None else "")
        out = _words(self.output_tokens, "output token")
        dist = self.context_dist
        if dist is not None:
            text = dist.describe() if isinstance(dist, ContextDist) else str(dist)
            if self.decode_only:
                return f"each a context drawn from {text} tokens (prompt already in the cache) then {out}"
            return (f"each a context drawn from {text} tokens: a prompt ({self._cached()}) then {out}")
        if self.context is not None:
            prompt = max(0, parse_tokens(self.context) - _fixed(self.output_tokens, 32))
            if self.decode_only:
                return f"each a {prompt:,}-token context already in the cache then {out}"
            return f"each a {prompt:,}-token prompt ({self._cached()}) then {out}"
        if self.prompt_tokens is None:
            prompt = f"a prompt of min({STANDARD_PROMPT:,}, the context less the output) tokens"
            if self.decode_only:
                return f"each {prompt} already in the cache then {out}"
            return f"each {prompt} ({self._cached()}) then {out}"
        p = self.prompt_tokens
        head = f"a {_fixed(p):,}-token prompt" if _fixed(p) is not None else f"a prompt of {_words(p, 'token')}"
        if self.decode_only:
            return f"each {head} already in the cache then {out}"
        return f"each {head} ({self._cached()}) then {out}"

    def _cached(self) -> str:
        if self.cached_share is not None:
            return f"{self.cached_share:.0%} cached"
        c = self.cached_prompt_tokens
        return "the instance's cached prefix" if c is None else f"{c:,} cached"

    def _arrivals(self, words: str, live: int | None) -> str:
        if self.replay is not None and not self.closed_loop:
            head = f"arrivals at the timestamps of the {self.replay.describe()}"
            if self.arrival_rate is not None:
                head += f" scaled to {self.arrival_rate:g} requests/s"
            return head + (f", at most {self.max_live:,} live" if self.max_live is not None else "")
        if self.arrival_rate is not None:
            head = f"open Poisson arrivals at {self.arrival_rate:g} requests/s"
            if self.duration_s is not None:
                head += f" for {self.duration_s:g} s"
            elif self.requests is not None:
                head += f" until {self.requests:,} requests"
            return head + (f", at most {self.max_live:,} live" if self.max_live is not None else "")
        head = f"closed loop of {words}" if live is not None else f"closed loop at {words}"
        if self.duration_s is not None:
            head += f" for {self.duration_s:g} s"
        elif live is not None:
            n = max(self.requests or live, self.rounds * live)
            head += f" ({n:,} requests: at least {self.rounds} per user)"
        else:
            head += f" (at least {self.rounds} requests per user)"
        if self.replay is not None:
            head += f", lengths from the {self.replay.describe()}"
        return head

    def describe(self, load: str = "the KV reserve's live cap") -> str:
        """The traffic as one line a user reads (``traffic: closed loop of 184 live requests (552
        requests: at least 3 per user), each a 8,192-token prompt (0 cached) then 1,024 output
        tokens``); ``load``: the words for the live requests when neither ``requests`` nor
        ``max_live`` fixes them (a study's rows each state theirs)."""
        if self.sessions is not None:
            return f"traffic: {self.sessions.describe()}"
        live, words = self._load(load)
        if self.decode_only:
            head = f"decode only (prompts already in the cache), {words} at once"
        else:
            head = self._arrivals(words, live)
        return f"traffic: {head}, {self.request_text()}"

    def to_dict(self, load: str = "the KV reserve's live cap") -> dict:
        """The traffic as JSON: its shape (``closed_loop``, ``poisson``, ``trace`` or
        ``decode_only``), its fields and ``text``, the :meth:`describe` line."""
        shape = "decode_only" if self.decode_only else "trace" if self.replay is not None and not self.closed_loop \
            else "poisson" if self.arrival_rate is not None else "closed_loop"
        dist = self.context_dist
        context = None if self.context is None else parse_tokens(self.context)
        prompt = _json(self.prompt_tokens)
        if context is not None:
            prompt = max(0, context - _fixed(self.output_tokens, 32))
        return dict(shape=shape, live_requests=self._load(load)[0], requests=self.requests, max_live=self.max_live,
                    context_tokens=context, prompt_tokens=prompt,
                    context_dist=dist.describe() if isinstance(dist, ContextDist) else dist,
                    cached_prompt_tokens=0 if self.decode_only else self.cached_prompt_tokens,
                    cached_share=None if self.decode_only else self.cached_share,
                    output_tokens=_json(self.output_tokens), arrival_rate=self.arrival_rate,
                    duration_s=self.duration_s, trace=None if self.replay is None else self.replay.source,
                    rounds=None if shape != "closed_loop" else self.rounds, text=self.describe(load))


    def record(self) -> dict:
        """The lengths a plan's speeds assume, as a mapping records them (``traffic``): ``isl``,
        ``osl`` (tokens or a distribution's text), ``cached_prompt`` (tokens or a share) and ``text``."""
        doc = {"isl": _json(self.prompt_tokens), "osl": _json(self.output_tokens),
               "cached_prompt": f"{self.cached_share:.0%}" if self.cached_share is not None else self.cached_prompt_tokens}
        return {**{k: v for k, v in doc.items() if v is not None}, "text": self.describe("the plan's live requests")}

    @classmethod
    def from_record(cls, doc: dict) -> Traffic:
        """The traffic a mapping's ``traffic`` record states (:meth:`record`)."""
        share, tokens = (None, None) if doc.get("cached_prompt") is None else parse_cached(doc["cached_prompt"])
        return cls(prompt_tokens=doc.get("isl"), output_tokens=doc.get("osl"),
                   cached_prompt_tokens=None if share is not None else tokens, cached_share=share)


def _fixed(value, default: int | None = None) -> int | None:
    """A length given as one number: that number (``default`` when None, None for a distribution)."""
    if value is None:
        return default
    if isinstance(value, ContextDist):
        return int(value.values[0]) if value.kind == "fixed" else None
    if isinstance(value, str) and ":" in value:
        d = parse_context_dist(value)
        return int(d.values[0]) if d.kind == "fixed" else None
    return parse_tokens(value)


def _json(value):
    """A length for JSON: a number, a distribution's text, or None."""
    if value is None or _fixed(value) is not None:
        return _fixed(value)
    return value.describe() if isinstance(value, ContextDist) else str(value)


def _words(value, unit: str) -> str:
    if value is None:
        return f"min({STANDARD_OUTPUT:,}, half the context) {unit}s"
    n = _fixed(value)
    if n is not None:
        return plural(n, unit)
    d = value if isinstance(value, ContextDist) else parse_context_dist(value)
    return f"{d.words()} {unit}s"


@dataclass(frozen=True)
class Serving:
    """How the server batches and decodes: the ``schedule`` (``continuous`` up to ``max_batch``,
    default the ``runtime``'s; ``micro-batch`` of ``micro_batch``), the step's token budget
    ``max_num_batched_tokens``, and speculative decoding with ``spec_k`` draft tokens of which
    ``spec_accept`` are accepted per step on average (``spec_k=None``: the instance's own)."""

    schedule: str | None = None
    max_batch: int | None = None
    runtime: str | None = None
    micro_batch: int | None = None
    max_num_batched_tokens: int | None = None
    spec_k: int | None = None
    spec_accept: float | None = None


@dataclass(frozen=True)
class RunSettings:
    """The run itself: the random ``seed`` (contexts, arrivals) and whether to keep the ``trace``
    of every step on every stage."""

    seed: int = 0
    trace: bool = False


def settle_schedule(serving: Serving, default_micro_batch: int) -> tuple[bool, int, str, str | None, int | None]:
    """(continuous, micro-batch, schedule, runtime, max batch) of a run: ``serving`` checked, its
    defaults filled in (``default_micro_batch``: the workload's)."""
    schedule, max_batch, runtime, micro_batch = serving.schedule, serving.max_batch, serving.runtime, serving.micro_batch
    if schedule is None:
        schedule = "micro-batch" if micro_batch is not None else "continuous"
    if schedule not in SCHEDULES:
        raise InvalidSpec(ARGUMENT, "schedule", f"unknown schedule {schedule!r} (choose from {', '.join(SCHEDULES)})")
    if runtime is not None and runtime not in RUNTIME_MAX_BATCH:
        raise InvalidSpec(ARGUMENT, "runtime", f"unknown runtime {runtime!r} "
                                               f"(choose from {', '.join(RUNTIME_MAX_BATCH)})")
    if max_batch is not None and max_batch < 1:
        raise InvalidSpec(ARGUMENT, "max_batch", "must be at least 1")
    continuous = schedule == "continuous"
    if continuous and micro_batch is not None:
        raise InvalidSpec(ARGUMENT, "micro_batch", "applies to the micro-batch schedule only (the continuous "
                                                   "schedule's limit is max_batch)")
    if not continuous and max_batch is not None:
        raise InvalidSpec(ARGUMENT, "max_batch", "applies to the continuous schedule only")
    micro_batch_ = micro_batch if micro_batch is not None else default_micro_batch
    if micro_batch_ < 1:
        raise InvalidSpec(ARGUMENT, "micro_batch", "must be at least 1")
    runtime_ = (runtime or DEFAULT_RUNTIME) if continuous else None
    max_batch_ = (RUNTIME_MAX_BATCH[runtime_] if max_batch is None else max_batch) \
        if continuous else None
    return continuous, micro_batch_, schedule, runtime_, max_batch_


_GROUPS = (Traffic, Serving, RunSettings)


def split_options(*, prefill: bool | None = None, **options) -> tuple[Traffic, Serving, RunSettings]:
    """Keyword options by their names (the CLI's and a mapping's spelling) as the run's traffic,
    serving and run settings; ``prefill=False`` is the older spelling of ``decode_only=True``
    (``prefill=True`` the default). An unknown name is a :class:`TypeError`, as for a call."""
    if prefill is not None:
        if prefill and options.get("decode_only"):
            raise InvalidSpec(ARGUMENT, "decode_only", "contradicts prefill=True: give one of them")
        options["decode_only"] = not prefill
    names = [{f.name for f in fields(group)} for group in _GROUPS]
    unknown = set(options).difference(*names)
    if unknown:
        raise TypeError(f"unknown simulation option {sorted(unknown)[0]!r}")
    return tuple(group(**{k: v for k, v in options.items() if k in own}) for group, own in zip(_GROUPS, names))


def spec_of(instance: Instance, spec_k: int | None, spec_accept: float | None) -> tuple[int, float | None]:
    """(draft tokens, acceptance length) a run decodes with: those given, else the instance's own
    speculation when it knows its acceptance length (else none)."""
    if spec_k is not None:
        return spec_k, spec_accept
    spec = getattr(instance, "speculation", None)
    if spec is None or spec.accept is None:
        return 0, spec_accept
    return spec.tokens, spec_accept if spec_accept is not None else spec.accept


def cached_prompt(instance: Instance, tokens: int | None) -> int:
    """Prompt tokens of every request found in the prefix cache: those given, else the instance's
    (:attr:`placer.problem.instance.Instance.cached_prompt_tokens`, set by the plan it was built for)."""
    if tokens is None:
        return int(getattr(instance, "cached_prompt_tokens", 0) or 0)
    if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
        raise InvalidSpec(ARGUMENT, "cached_prompt_tokens", "prompt tokens found in the prefix cache: an integer >= 0")
    return tokens


def check_counts(**values) -> None:
    """The numeric arguments, each in its own words."""
    out = values["output_tokens"]
    if isinstance(out, (int, float)) and out < 1:
        raise InvalidSpec(ARGUMENT, "output_tokens", "must be at least 1")
    rate = values["arrival_rate"]
    if rate is not None and not rate > 0:
        raise InvalidSpec(ARGUMENT, "arrival_rate", "must be a positive number of requests per second")
    duration = values["duration_s"]
    if duration is not None and not duration > 0:
        raise InvalidSpec(ARGUMENT, "duration_s", "must be positive (seconds)")
    for name in ("max_live", "max_num_batched_tokens", "rounds"):
        v = values[name]
        if v is not None and v < 1:
            raise InvalidSpec(ARGUMENT, name, "must be at least 1")


def study_traffic(context_tokens: int, output_tokens: int | None, sim: dict | None = None,
                  model=None) -> Traffic:
    """The traffic a study's loaded runs serve (``placer compare``, ``solve``, ``frontier``,
    ``simulate --compare``), resolved as :func:`resolve` resolves it on an instance of ``model`` at
    ``context_tokens``: ``output_tokens`` per request unless the options ``sim`` (:func:`split_options`
    names) say otherwise; no cached prefix unless given."""
    sim = {k: v for k, v in (sim or {}).items() if v is not None}
    options = {k: sim[k] for k in ("context_dist", "context", "prompt_tokens", "cached_share", "replay",
                                   "closed_loop", "max_live", "requests") if k in sim}
    if output_tokens is not None:
        options["output_tokens"] = output_tokens
    decode_only = bool(sim.get("decode_only"))
    t = Traffic(decode_only=decode_only, cached_prompt_tokens=0 if decode_only else sim.get("cached_prompt_tokens") or 0,
                **options)
    return resolve_lengths(t, context_tokens, getattr(model, "default_traffic", None) or {})[0]


def resolve_lengths(t: Traffic, reserved: int, spec: dict, instance_traffic: Traffic | None = None,
                    cached: int | None = None) -> tuple[Traffic, Shapes]:
    """``t`` with every length filled in (the form the traffic line states) and the :class:`Shapes`
    a run draws from: what ``t`` leaves unset comes from ``instance_traffic`` (the plan's), then
    the spec's ``default_traffic`` (``isl``, ``osl``, ``cached_prompt``), then the standard shape
    capped to the ``reserved`` context; ``cached``: the instance's cached prompt tokens."""
    base = instance_traffic if isinstance(instance_traffic, Traffic) else \
        Traffic.from_record(instance_traffic) if instance_traffic else Traffic()
    if not t.older_form and t.replay is None and base.replay is not None and t.prompt_tokens is None:
        t = replace(t, replay=base.replay, closed_loop=t.closed_loop or base.closed_loop)
    if t.replay is not None:
        share = t.cached_share if t.cached_share is not None else None
        return t, Shapes(output=ContextDist("fixed", (1.0,)), reserved=reserved, trace=t.replay, cached_share=share)
    share, cached_tokens = _cached_of(t, base, spec, cached)
    out = t.output_tokens if t.output_tokens is not None else base.output_tokens
    if out is None:
        out = spec.get("osl") or min(STANDARD_OUTPUT, max(1, reserved // 2))
    out_dist = _lengths(out, "output_tokens")
    if t.older_form:
        if t.context is not None and t.context_dist is not None:
            raise InvalidSpec(ARGUMENT, "context_dist", "give context or context_dist, not both")
        if t.prompt_tokens is not None:
            raise InvalidSpec(ARGUMENT, "prompt_tokens", "give a prompt length (isl) or a total context, not both")
        if out_dist.kind != "fixed":
            raise InvalidSpec(ARGUMENT, "output_tokens", "a distribution of outputs needs a prompt length (isl), "
                                                         "not a total context")
        total = parse_context_dist(t.context_dist) if isinstance(t.context_dist, str) else t.context_dist
        total = total or ContextDist("fixed", (float(parse_tokens(t.context)),))
        shapes = Shapes(output=out_dist, reserved=reserved, total=total, cached=cached_tokens, cached_share=share)
        return replace(t, output_tokens=int(out_dist.values[0]), cached_prompt_tokens=cached_tokens,
                       cached_share=share), shapes
    prompt = t.prompt_tokens if t.prompt_tokens is not None else base.prompt_tokens
    if prompt is None:
        prompt = spec.get("isl") or max(1, min(STANDARD_PROMPT, reserved - int(out_dist.mean)))
    prompt_dist = _lengths(prompt, "prompt_tokens")
    shapes = Shapes(output=out_dist, reserved=reserved, prompt=prompt_dist, cached=cached_tokens, cached_share=share)
    return replace(t, prompt_tokens=_simplest(prompt_dist), output_tokens=_simplest(out_dist),
                   cached_prompt_tokens=cached_tokens, cached_share=share), shapes


def _lengths(value, name: str) -> ContextDist:
    if isinstance(value, ContextDist):
        return value
    if isinstance(value, str) and ":" in value:
        return parse_context_dist(value, name)
    try:
        n = parse_tokens(value)
    except (TypeError, ValueError, InvalidSpec):
        raise InvalidSpec(ARGUMENT, name, f"cannot read {value!r}: tokens (8k) or a distribution "
                                          "(uniform:LO-HI, lognormal:MEDIAN,SIGMA)") from None
    if n < 1:
        raise InvalidSpec(ARGUMENT, name, "must be at least 1 token")
    return ContextDist("fixed", (float(n),))


def _simplest(d: ContextDist) -> int | ContextDist:
    return int(d.values[0]) if d.kind == "fixed" else d


def _cached_of(t: Traffic, base: Traffic, spec: dict, cached: int | None) -> tuple[float | None, int]:
    """(share, tokens) of each prompt in the prefix cache: the traffic's, the plan's, the
    instance's, the spec's (``cached_prompt``: tokens or ``90%``), else none."""
    for source in (t, base):
        if source.cached_share is not None:
            return source.cached_share, 0
        if source.cached_prompt_tokens is not None:
            return None, source.cached_prompt_tokens
    if cached:
        return None, cached
    given = spec.get("cached_prompt")
    if given is None:
        return None, 0
    return parse_cached(given, "cached_prompt")


def parse_cached(value, name: str = "cached_prompt") -> tuple[float | None, int]:
    """``90%`` (a share of each prompt) or a token count (``8k``): (share, tokens)."""
    text = str(value).strip()
    if text.endswith("%"):
        try:
            share = float(text[:-1]) / 100
        except ValueError:
            share = -1.0
        if not 0 <= share <= 1:
            raise InvalidSpec(ARGUMENT, name, f"{value!r}: a share from 0% to 100%")
        return share, 0
    if text.isdigit():
        return None, int(text)
    try:
        n = parse_tokens(text)
    except (TypeError, ValueError, InvalidSpec):
        raise InvalidSpec(ARGUMENT, name, f"{value!r}: prompt tokens (8k) or a share of each prompt (90%)") from None
    if n < 0:
        raise InvalidSpec(ARGUMENT, name, "must be at least 0 tokens")
    return None, n


def resolve(traffic: Traffic, instance: Instance) -> tuple[Traffic, Shapes]:
    """``traffic`` on ``instance`` with every length filled in, and the :class:`Shapes` its run
    draws: :func:`resolve_lengths` with the instance's plan traffic, cached prefix, model spec and
    reserved context."""
    spec = getattr(instance.model, "default_traffic", None) or {}
    if not spec and getattr(instance, "base_model", None) is not None:
        spec = getattr(instance.base_model, "default_traffic", None) or {}
    cached = int(getattr(instance, "cached_prompt_tokens", 0) or 0)
    if traffic.cached_prompt_tokens is not None:
        cached_prompt(instance, traffic.cached_prompt_tokens)          # checked
    return resolve_lengths(traffic, instance.workload.context_tokens, spec, getattr(instance, "traffic", None), cached)


def traced_arrivals(t: Traffic) -> tuple[float, ...] | None:
    """A trace's arrival times (seconds from its first), scaled so that their mean rate is
    ``t.arrival_rate`` when given; None when the trace does not drive arrivals (none, or a closed loop)."""
    if t.replay is None or t.closed_loop:
        return None
    times = tuple(r.arrival_s for r in t.replay.rows)
    rate = t.replay.rate
    if t.arrival_rate is not None and rate:
        times = tuple(x * rate / t.arrival_rate for x in times)
    return times


def arrival_at(times: tuple[float, ...], i: int) -> float:
    """Request ``i``'s arrival (seconds) replaying ``times`` round after round, each round one mean
    gap after the last one's final arrival."""
    n = len(times)
    period = times[-1] + (times[-1] / (n - 1) if n > 1 and times[-1] > 0 else 1.0)
    return times[i % n] + (i // n) * period


def shortest_prompt(instance: Instance, output_tokens: int) -> int:
    """The shortest prompt a request of ``instance``'s traffic (with ``output_tokens`` out) has:
    the KV a lone request reads at least (1 for a distribution or a trace)."""
    _t, shapes = resolve(Traffic(output_tokens=output_tokens), instance)
    if shapes.trace is not None:
        return 1
    if shapes.prompt is None:
        return max(1, int(min(shapes.total.values)) - output_tokens) if shapes.total.kind != "lognormal" else 1
    return max(1, int(min(shapes.prompt.values))) if shapes.prompt.kind in ("fixed", "choice") else \
        max(1, int(shapes.prompt.values[0])) if shapes.prompt.kind == "uniform" else 1


def served(traffic: Traffic, requests: int, live_cap: int) -> Traffic:
    """``traffic`` (resolved) as a run served it: the requests served and the live cap."""
    return replace(traffic, requests=requests, max_live=live_cap)
