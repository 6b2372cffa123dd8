"""The arguments of a simulation run: the requests it serves (:class:`Traffic`), how the server
batches and decodes them (:class:`Serving`) and the run's own settings (:class:`RunSettings`);
checked and resolved: counts, the context distribution, the speculation and the prefix-cache hit
a run takes from its instance when not given."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from placer.problem.instance import Instance
from placer.simulate.contexts import ContextDist, parse_context_dist
from placer.specs.errors import ARGUMENT, InvalidSpec
from placer.specs.units import parse_tokens, plural

__all__ = ["Traffic", "Serving", "RunSettings", "split_options", "DEFAULT_ROUNDS", "spec_of", "cached_prompt",
           "check_counts", "context_dist", "study_traffic"]

# closed loop: requests per user at least, so that a steady window exists between the first
# round's end (every user has finished one) and the last request's issue
DEFAULT_ROUNDS = 3


@dataclass(frozen=True)
class Traffic:
    """The requests a run serves (see :mod:`placer.simulate.des`): ``requests`` in all (default:
    the live-request cap), at most ``max_live`` live at once, each of a total context ``context``
    (tokens) or drawn from ``context_dist`` (default the workload's context) of which the last
    ``output_tokens`` are generated; a Poisson stream of ``arrival_rate`` per second for
    ``duration_s``, else a closed loop of at least ``rounds`` requests per user; ``decode_only``
    leaves prefill out; ``cached_prompt_tokens`` of every prompt are a prefix-cache hit (default
    the instance's)."""

    requests: int | None = None
    max_live: int | None = None
    output_tokens: int = 32
    context: int | str | None = None
    context_dist: str | ContextDist | None = None
    arrival_rate: float | None = None
    duration_s: float | None = None
    rounds: int = DEFAULT_ROUNDS
    decode_only: bool = False
    cached_prompt_tokens: int | None = None

    def _load(self, load: str) -> tuple[int | None, str]:
        """Live requests (None: not fixed here) and their words."""
        given = [n for n in (self.requests, self.max_live) if n is not None]
        if not given:
            return None, load
        return min(given), f"{min(given):,} live requests"

    def _request(self) -> str:
        """What one request is: its prompt (of which cached) and its output tokens."""
        out = plural(self.output_tokens, "output token")
        dist = self.context_dist
        if dist is not None:
            text = dist.describe() if isinstance(dist, ContextDist) else str(dist)
            if self.decode_only:
                return f"each a context drawn from {text} tokens (prompt already in the cache) then {out}"
            return (f"each a context drawn from {text} tokens: a prompt ({self._cached()}) then {out}")
        if self.context is None:
            if self.decode_only:
                return f"each the workload's context already in the cache then {out}"
            return f"each the workload's context: a prompt ({self._cached()}) then {out}"
        prompt = max(0, parse_tokens(self.context) - self.output_tokens)
        if self.decode_only:
            return f"each a {prompt:,}-token context already in the cache then {out}"
        return f"each a {prompt:,}-token prompt ({self._cached()}) then {out}"

    def _cached(self) -> str:
        c = self.cached_prompt_tokens
        return "the instance's cached prefix" if c is None else f"{c:,} cached"

    def describe(self, load: str = "the KV reserve's live cap") -> str:
        """The traffic as one line a user reads (``traffic: closed loop of 184 live requests (552
        requests: at least 3 per user), each a 262,112-token prompt (0 cached) then 32 output tokens``:
        the prompt is the context less the output); ``load``: the words for the live requests when
        neither ``requests`` nor ``max_live`` fixes them (a study's rows each state theirs)."""
        live, words = self._load(load)
        if self.decode_only:
            head = f"decode only (prompts already in the cache), {words} at once"
        elif self.arrival_rate is not None:
            head = f"open Poisson arrivals at {self.arrival_rate:g} requests/s"
            if self.duration_s is not None:
                head += f" for {self.duration_s:g} s"
            elif self.requests is not None:
                head += f" until {self.requests:,} requests"
            if self.max_live is not None:
                head += f", at most {self.max_live:,} live"
        else:
            head = f"closed loop of {words}" if live is not None else f"closed loop at {words}"
            if self.duration_s is not None:
                head += f" for {self.duration_s:g} s"
            elif live is not None:
                n = max(self.requests or live, self.rounds * live)
                head += f" ({n:,} requests: at least {self.rounds} per user)"
            else:
                head += f" (at least {self.rounds} requests per user)"
        return f"traffic: {head}, {self._request()}"

    def to_dict(self, load: str = "the KV reserve's live cap") -> dict:
        """The traffic as JSON: its shape (``closed_loop``, ``poisson`` or ``decode_only``), its fields
        and ``text``, the :meth:`describe` line."""
        shape = "decode_only" if self.decode_only else "poisson" if self.arrival_rate is not None else "closed_loop"
        dist = self.context_dist
        context = None if self.context is None else parse_tokens(self.context)
        return dict(shape=shape, live_requests=self._load(load)[0], requests=self.requests, max_live=self.max_live,
                    context_tokens=context,
                    prompt_tokens=None if context is None else max(0, context - self.output_tokens),
                    context_dist=dist.describe() if isinstance(dist, ContextDist) else dist,
                    cached_prompt_tokens=0 if self.decode_only else self.cached_prompt_tokens,
                    output_tokens=self.output_tokens, arrival_rate=self.arrival_rate, duration_s=self.duration_s,
                    rounds=None if shape != "closed_loop" else self.rounds, text=self.describe(load))


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
    if values["output_tokens"] < 1:
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


def context_dist(instance: Instance, context, context_dist) -> ContextDist:
    if context_dist is not None and context is not None:
        raise InvalidSpec(ARGUMENT, "context_dist", "give context or context_dist, not both")
    if isinstance(context_dist, str):
        return parse_context_dist(context_dist)
    if context_dist is not None:
        return context_dist
    c = instance.workload.context_tokens if context is None else parse_tokens(context)
    return ContextDist("fixed", (float(c),))


def study_traffic(context_tokens: int, output_tokens: int, sim: dict | None = None) -> Traffic:
    """The traffic a study's loaded runs serve (``placer compare``, ``solve``, ``frontier``,
    ``simulate --compare``): ``output_tokens`` per request at the workload's ``context_tokens`` unless
    the options ``sim`` (:func:`split_options` names) say otherwise; no cached prefix unless given."""
    sim = sim or {}
    dist = sim.get("context_dist")
    return Traffic(output_tokens=output_tokens, context=None if dist is not None else context_tokens,
                   context_dist=dist, max_live=sim.get("max_live"), requests=sim.get("requests"),
                   decode_only=bool(sim.get("decode_only")),
                   cached_prompt_tokens=0 if sim.get("decode_only") else sim.get("cached_prompt_tokens") or 0)


def served(traffic: Traffic, requests: int, live_cap: int, dist: ContextDist, cached: int) -> Traffic:
    """``traffic`` as a run served it, every default filled in: the requests served, the live cap,
    the context (fixed) or its distribution, and the cached prefix (what the traffic line states)."""
    fixed = dist.kind == "fixed"
    return replace(traffic, requests=requests, max_live=live_cap, context=int(dist.values[0]) if fixed else None,
                   context_dist=None if fixed else dist, cached_prompt_tokens=cached)
