"""What a user asks of a plan (:class:`Requirements`) and how to solve it (:class:`SolverSettings`).

A :class:`Requirements` has four parts, each its own frozen type so a reader sees which fields go
together: :class:`Placement` (how a replica is laid out), :class:`Targets` (speed floor, TTFT,
objectives), :class:`SpecDecoding` (speculative decoding) and :class:`Pools` (a disaggregated
prefill and decode pool)::

    Requirements(placement=Placement(mode="contiguous", degrees=(8,)), targets=Targets(min_user_tps=20))

All are frozen and checked when made: a combination no planner can honour is refused here, once,
with the field it is about (the command line names the flag that sets the field), instead of in
each entry point. This module is also the one home of the planners' defaults.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from placer.problem.instance import MODES, REQUIREMENTS
from placer.specs.errors import ARGUMENT, InvalidSpec
from placer.specs.reserve import Reserve

if TYPE_CHECKING:
    from placer.specs.fleet import Fleet
    from placer.specs.model import LayerGraph

__all__ = ["Requirements", "Placement", "Targets", "SpecDecoding", "Pools", "SolverSettings",
           "SPLIT_GRANULARITY", "DEFAULT_METHOD", "SEARCH_METHOD",
           "FALLBACK_METHOD", "SPEED_OBJECTIVES", "granularity_for", "floor_from"]

# ----------------------------------------------------------------------------- defaults (one home)
SPLIT_GRANULARITY = "shards:4"      # split mode's refinement unless one is asked for
DEFAULT_METHOD = "cpsat"            # plan()'s and placer solve's method
# the method a search that solves many instances uses when none is asked for (budget, replica,
# speed-floor and frontier searches): the exact chain DP where it places, CP-SAT elsewhere
SEARCH_METHOD = {"contiguous": "dp", "free": "cpsat", "split": "cpsat"}
# when the asked method does not place in a mode (the simulator's mode comparison), the one used instead
FALLBACK_METHOD = {"contiguous": "dp", "free": "ffd", "split": "dp"}
SPEED_OBJECTIVES = ("devices", "mw", "tokens-per-mw", "cost")
DEFAULT_OBJECTIVE = "devices,concurrency,latency"


def granularity_for(mode: str, granularity: str | None) -> str:
    """The refinement ``mode`` places at: ``granularity`` when given, else split mode's default
    (:data:`SPLIT_GRANULARITY`) or whole layers for the other modes."""
    if granularity is None:
        return SPLIT_GRANULARITY if mode == "split" else "layer"
    return granularity


def floor_from(min_user_tps: float | None = None, max_itl_ms: float | None = None) -> float:
    """The per-user floor in tokens/s from ``min_user_tps`` or ``max_itl_ms`` (exactly one of them)."""
    if (min_user_tps is None) == (max_itl_ms is None):
        raise InvalidSpec(ARGUMENT, "min_user_tps", "give --min-user-tps or --max-itl-ms, not both")
    if min_user_tps is not None:
        if not min_user_tps > 0 or not math.isfinite(min_user_tps):
            raise InvalidSpec(ARGUMENT, "min_user_tps", "must be a positive number of tokens/s")
        return float(min_user_tps)
    if not max_itl_ms > 0 or not math.isfinite(max_itl_ms):
        raise InvalidSpec(ARGUMENT, "max_itl_ms", "must be a positive number of milliseconds")
    return 1000.0 / max_itl_ms


def _ints(value, name: str) -> tuple[int, ...] | None:
    if value is None:
        return None
    out = tuple(value)
    if not out or any(not isinstance(g, int) or isinstance(g, bool) or g < 1 for g in out):
        raise InvalidSpec(ARGUMENT, name, "degrees are positive integers, at least one")
    return tuple(sorted(set(out)))


# ----------------------------------------------------------------------------- the parts of a request
def _positive(value, name: str, *, integer: bool = False) -> None:
    if value is None:
        return
    bad = (not isinstance(value, int) or isinstance(value, bool)) if integer else not isinstance(value, (int, float))
    if bad or not value > 0 or not math.isfinite(value):
        raise InvalidSpec(ARGUMENT, name, "must be a positive " + ("integer" if integer else "number"))


@dataclass(frozen=True)
class Placement:
    """How every replica is laid out on the devices.

    ``mode``: contiguous, free or split (None: the method's own, contiguous for CP-SAT);
    ``granularity``: split mode's refinement (default :data:`SPLIT_GRANULARITY`); ``degrees``: the
    tensor-parallel degrees to try (None: every degree the model and the fleet's nodes allow);
    ``per_stage_degrees``: a degree per stage chosen from ``degrees``; ``expert_parallel``: True
    spreads experts whole, False splits them by tensor, None tries both where that matters (speed
    floors and degree comparisons on MoE models; a plain solve splits by tensor);
    ``attention_dp``: attention data parallelism with experts spread whole
    (:mod:`placer.problem.reductions.attention_dp`): True plans with it only, False never, None
    tries it for models with MLA attention and MoE layers where it matters, when no
    tensor-parallel layout places (every TP rank keeps the whole MLA latent cache, so TP cannot
    hold more MLA requests); ``reserve`` overrides the device types' runtime reserve; ``pins``:
    ``N=DEVICE``, ``NAME=DEVICE`` or ``A-B``; ``constraints``: names of
    :data:`placer.problem.instance.REQUIREMENTS` (such as ``attention-per-stage``); ``runtime``: a
    runtime the plan must run on as written (vllm, sglang, megatron, torch): its rules
    (:mod:`placer.problem.runtime_rules`) join the constraints, restrict the mode to contiguous and
    the degrees to its own, and are proven like any other constraint.
    """

    mode: str | None = None
    granularity: str | None = None
    degrees: tuple[int, ...] | None = None
    per_stage_degrees: bool = False
    expert_parallel: bool | None = None
    attention_dp: bool | None = None
    reserve: Reserve | None = None
    pins: tuple[str, ...] = ()
    constraints: tuple[str, ...] = ()
    runtime: str | None = None

    def __post_init__(self):
        set_ = object.__setattr__
        set_(self, "degrees", _ints(self.degrees, "tp"))
        set_(self, "pins", tuple(self.pins))
        set_(self, "constraints", tuple(dict.fromkeys(self.constraints)))
        if self.mode is not None and self.mode not in MODES:
            raise InvalidSpec(ARGUMENT, "mode", f"must be one of {', '.join(MODES)}")
        for c in self.constraints:
            if c not in REQUIREMENTS:
                raise InvalidSpec(ARGUMENT, "require", f"unknown requirement {c!r} (one of {', '.join(REQUIREMENTS)})")
        if self.runtime is not None:
            from placer.problem.runtime_rules import check_runtime_request

            check_runtime_request(self.runtime, mode=self.mode, degrees=self.degrees, per_stage=self.per_stage_degrees)
        if self.attention_dp:
            if self.mode == "split":
                raise InvalidSpec(ARGUMENT, "attention_dp", "attention data parallelism runs in contiguous or "
                                                            "free mode, not split")
            if self.per_stage_degrees:
                raise InvalidSpec(ARGUMENT, "attention_dp", "attention data parallelism runs at one degree; "
                                                            "solve without --per-stage-tp")
            if self.runtime not in (None, "vllm", "sglang"):
                raise InvalidSpec(ARGUMENT, "attention_dp", f"{self.runtime} has no attention data parallelism "
                                                            "(vllm and sglang run it)")
        if self.per_stage_degrees:
            if self.mode not in (None, "contiguous"):
                raise InvalidSpec(ARGUMENT, "mode", "per-stage degrees place contiguous stages; use --mode contiguous")
            if self.pins:
                raise InvalidSpec(ARGUMENT, "pins", "pins are not supported with --per-stage-tp")

    def constraints_for(self, model) -> tuple[str, ...]:
        """The constraints of every placement of ``model``: the asked ones and the runtime's rules."""
        if self.runtime is None:
            return self.constraints
        from placer.problem.runtime_rules import runtime_requirements

        return tuple(dict.fromkeys(self.constraints + runtime_requirements(self.runtime, model)))

    @property
    def layout_degrees(self) -> tuple[int, ...] | None:
        """The degrees to try: the asked ones, else the runtime's own when it has a restriction."""
        if self.degrees is not None or self.runtime is None:
            return self.degrees
        from placer.problem.runtime_rules import runtime_rules

        return runtime_rules(self.runtime).degrees

    def granularity_of(self, mode: str) -> str:
        return granularity_for(mode, self.granularity)

    def replace(self, **changes) -> Placement:
        return replace(self, **changes)

    def to_dict(self) -> dict:
        doc = asdict(replace(self, reserve=None))
        doc["reserve"] = None if self.reserve is None else self.reserve.to_dict()
        return doc


@dataclass(frozen=True)
class Targets:
    """What the plan optimises and the service levels it keeps.

    ``min_user_tps`` / ``max_itl_ms``: a per-user speed floor (replicas added as needed) with
    ``speed_objective`` choosing among the plans that meet it (devices, mw, tokens-per-mw);
    ``max_ttft_ms``: beside a speed floor (a plan's requirements refuse it without one), the p99
    time to first token each replica keeps to at its load (the closed-loop simulation with chunked
    prefill), and a disaggregated plan's TTFT target; ``output_tokens``: tokens each simulated request decodes when a floor is checked
    (a plan's ``traffic`` replaces it; the CLI passes its traffic's);
    ``objective``: CP-SAT's levels in order (default devices, concurrency, latency);
    ``cached_prompt_tokens``: of every prompt, the leading tokens a prefix cache already holds (an
    agent's repeated context); every simulation of the plan prefills only the rest, and a prefill
    pool computes only the rest (the KV moved to decode is still the whole prompt's); ``sim``: how a
    speed floor's searches simulate, ``"fast"`` (screened by :mod:`placer.simulate.steady`, every
    figure the plan reports confirmed by the event run) or ``"exact"`` (the event run throughout).
    """

    min_user_tps: float | None = None
    max_itl_ms: float | None = None
    max_ttft_ms: float | None = None
    speed_objective: str = "devices"
    objective: str | None = None
    output_tokens: int = 16
    cached_prompt_tokens: int = 0
    sim: str = "fast"

    def __post_init__(self):
        from placer.simulate.steady import check_sim

        check_sim(self.sim)
        if self.speed_objective not in SPEED_OBJECTIVES:
            raise InvalidSpec(ARGUMENT, "objective", f"with a speed floor: {', '.join(SPEED_OBJECTIVES)}")
        if not isinstance(self.output_tokens, int) or self.output_tokens < 1:
            raise InvalidSpec(ARGUMENT, "output_tokens", "must be a positive number of tokens")
        c = self.cached_prompt_tokens
        if not isinstance(c, int) or isinstance(c, bool) or c < 0:
            raise InvalidSpec(ARGUMENT, "cached_prompt_tokens",
                              "prompt tokens found in the prefix cache: an integer >= 0")
        if self.objective is not None:
            from placer.algorithms.registry import parse_objective

            try:
                parse_objective(self.objective)
            except ValueError as exc:
                raise InvalidSpec(ARGUMENT, "objective", str(exc)) from None
        if self.max_ttft_ms is not None and not (isinstance(self.max_ttft_ms, (int, float)) and self.max_ttft_ms > 0
                                                 and math.isfinite(self.max_ttft_ms)):
            raise InvalidSpec(ARGUMENT, "max_ttft_ms", "must be a positive number of milliseconds")
        if self.has_speed_floor:
            floor_from(self.min_user_tps, self.max_itl_ms)      # one of them, and a sensible value

    @property
    def has_speed_floor(self) -> bool:
        return self.min_user_tps is not None or self.max_itl_ms is not None

    @property
    def speed_floor(self) -> float | None:
        """The per-user floor in tokens/s, or None."""
        return floor_from(self.min_user_tps, self.max_itl_ms) if self.has_speed_floor else None

    @property
    def cpsat_objective(self) -> str:
        return self.objective or DEFAULT_OBJECTIVE

    def replace(self, **changes) -> Targets:
        return replace(self, **changes)

    def to_dict(self) -> dict:
        return dict(asdict(self), speed_floor_tokens_per_s=self.speed_floor)


@dataclass(frozen=True)
class SpecDecoding:
    """Speculative decoding (:mod:`placer.specs.speculative`): ``tokens`` drafted per step, the
    ``method`` (None: draft_model with a draft model, else the model's MTP layers), a
    ``draft_model`` placed beside the target and the acceptance length ``accept`` (None: the
    published default for the model's family). The drafter's nodes (the model's MTP layers, or a
    draft model's nodes added beside the target's) are placed on the LM head's stage
    (``mtp-with-head``). ``tokens`` 0 is no speculation (then nothing else may be set)."""

    tokens: int = 0
    method: str | None = None
    draft_model: LayerGraph | None = None
    accept: float | None = None

    def __post_init__(self):
        from placer.specs.speculative import SPEC_METHODS

        k = self.tokens
        if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k <= 64:
            raise InvalidSpec(ARGUMENT, "spec_tokens", "draft tokens per step: an integer from 0 (none) to 64")
        if not k and (self.method is not None or self.draft_model is not None or self.accept is not None):
            which = "spec_method" if self.method is not None else (
                "draft_model" if self.draft_model is not None else "spec_accept")
            raise InvalidSpec(ARGUMENT, which, "speculative decoding needs spec_tokens (--spec-tokens K)")
        if self.method is not None and self.method not in SPEC_METHODS:
            raise InvalidSpec(ARGUMENT, "spec_method", f"must be one of {', '.join(SPEC_METHODS)}")
        if self.accept is not None and not (isinstance(self.accept, (int, float)) and 1.0 <= self.accept <= k + 1):
            raise InvalidSpec(ARGUMENT, "spec_accept",
                              f"an acceptance length is between 1 and spec_tokens + 1 = {k + 1}")

    def to_dict(self) -> dict:
        return dict(tokens=self.tokens, method=self.method, accept=self.accept,
                    draft_model=None if self.draft_model is None else self.draft_model.name)


@dataclass(frozen=True)
class Pools:
    """A prefill pool and a decode pool (:mod:`placer.planning.disagg`): the prefill pool on
    ``prefill_fleet`` (a second :class:`~placer.specs.fleet.Fleet`, or a device type of the fleet;
    None: the same fleet), for ``rate`` requests/s (None: the workload's concurrency in decode),
    or with ``maximize_rate`` the most requests/s the fleet serves under the targets;
    ``prompt_tokens`` in (default the workload's context; the CLI passes the traffic's) and ``decode_tokens`` out per request;
    ``max_num_batched_tokens``: the prefill chunk (default the simulator's token budget). TTFT
    and TPOT targets are the requirements' :class:`Targets` (``max_ttft_ms``, the speed floor)."""

    prefill_fleet: Fleet | str | None = field(default=None, compare=False)
    rate: float | None = None
    maximize_rate: bool = False
    prompt_tokens: int | None = None
    decode_tokens: int = 1000
    max_num_batched_tokens: int | None = None

    def __post_init__(self):
        _positive(self.rate, "rate")
        for name in ("prompt_tokens", "decode_tokens", "max_num_batched_tokens"):
            _positive(getattr(self, name), name, integer=True)
        if self.maximize_rate and self.rate is not None:
            raise InvalidSpec(ARGUMENT, "rate", "give a rate or ask for the most the fleet serves, not both")

    def replace(self, **changes) -> Pools:
        return replace(self, **changes)

    def to_dict(self) -> dict:
        doc = asdict(replace(self, prefill_fleet=None))     # a Fleet is named, not copied
        pf = self.prefill_fleet
        doc["prefill_fleet"] = pf if pf is None or isinstance(pf, str) else pf.name
        return doc


@dataclass(frozen=True)
class Requirements:
    """What the plan must satisfy and what it optimises, in four parts: ``placement`` (how a
    replica is laid out: :class:`Placement`), ``targets`` (speed floor, TTFT, objectives:
    :class:`Targets`), ``speculation`` (:class:`SpecDecoding`, None: none) and ``pools`` (a
    disaggregated plan's :class:`Pools`, None: one pool that prefills and decodes). Each part checks
    its own fields when made; this class refuses the combinations of parts no planner honours,
    naming the field. ``Requirements(placement=Placement(mode="contiguous"))``,
    ``Requirements(targets=Targets(min_user_tps=20))``.
    """

    placement: Placement = Placement()
    targets: Targets = Targets()
    speculation: SpecDecoding | None = None
    pools: Pools | None = None
    # the requests every speed of the plan is for (placer.simulate.arguments.Traffic): prompt and output
    # lengths, the prefix-cache hit; None: the model spec's default traffic, else the standard shape
    traffic: Any = None

    def __post_init__(self):
        if self.speculation is not None and not self.speculation.tokens:
            object.__setattr__(self, "speculation", None)       # SpecDecoding(tokens=0): none
        p, t = self.placement, self.targets
        if self.pools is not None:
            if t.max_ttft_ms is None:
                raise InvalidSpec(ARGUMENT, "max_ttft_ms", "a disaggregated plan needs a TTFT target (--max-ttft-ms)")
            if not t.has_speed_floor:
                raise InvalidSpec(ARGUMENT, "max_itl_ms", "a disaggregated plan needs a TPOT target "
                                                          "(--max-itl-ms or --min-user-tps)")
            if p.per_stage_degrees:
                raise InvalidSpec(ARGUMENT, "per_stage_tp", "per-stage degrees are not planned in disaggregated pools")
            if p.mode not in (None, "contiguous"):
                raise InvalidSpec(ARGUMENT, "mode", "disaggregated pools place contiguous stages")
        if t.max_ttft_ms is not None and not t.has_speed_floor:
            raise InvalidSpec(ARGUMENT, "max_ttft_ms", "a TTFT target is planned beside a speed floor "
                                                       "(--min-user-tps or --max-itl-ms)")
        if self.speculation is not None and p.per_stage_degrees:
            raise InvalidSpec(ARGUMENT, "per_stage_tp", "speculative decoding places its drafter with the LM head, "
                                                        "which per-stage degrees do not model; solve at one degree")
        if t.has_speed_floor:
            if p.per_stage_degrees:
                raise InvalidSpec(ARGUMENT, "per_stage_tp", "a speed floor cannot be combined with per-stage degrees")
            if p.pins:
                raise InvalidSpec(ARGUMENT, "pins", "pins cannot be combined with a speed floor")

    def mode_for(self, method: str) -> str:
        """The mode placed in: the asked one, else contiguous for speed floors, per-stage degrees and
        a runtime's plans, else ``method``'s own (contiguous for CP-SAT, free for typepack and ffd)."""
        p = self.placement
        if p.mode is not None:
            return p.mode
        if self.targets.has_speed_floor or p.per_stage_degrees or p.runtime is not None:
            return "contiguous"
        from placer.algorithms import default_mode

        return default_mode(method)

    def replace(self, **changes) -> Requirements:
        return replace(self, **changes)

    def to_dict(self) -> dict:
        return dict(placement=self.placement.to_dict(), targets=self.targets.to_dict(),
                    speculation=None if self.speculation is None else self.speculation.to_dict(),
                    pools=None if self.pools is None else self.pools.to_dict(),
                    traffic=None if self.traffic is None else self.traffic.record())


@dataclass(frozen=True)
class SolverSettings:
    """How to solve: ``method`` (a name of :data:`placer.algorithms.METHODS`; None lets searches
    that solve many instances pick :data:`SEARCH_METHOD`), CP-SAT's ``time_limit`` (seconds, for the
    whole plan), ``seed`` and ``threads``, ``progress(info)`` for the solver's reports, a
    shared ``deadline`` (:class:`placer.algorithms.deadline.Deadline`), and ``jobs``: processes
    solving independent layouts at once (:func:`placer.planning.solve.search_layouts`; 1: in this
    process), or ``backend`` ``"ray"``: one Ray task per layout, on the cluster at ``address``
    (default: a local one; :func:`placer.planning.tasks.run_tasks`)."""

    method: str | None = DEFAULT_METHOD
    time_limit: float = 30.0
    seed: int = 0
    threads: int = 2
    progress: Callable | None = field(default=None, compare=False)
    deadline: Any = field(default=None, compare=False)
    jobs: int = 1
    backend: str = "process"
    address: str | None = None

    def __post_init__(self):
        if self.method is not None:
            from placer.algorithms.registry import method as registry_row

            registry_row(self.method)           # InvalidSpec (field method) for an unknown name
        if not (isinstance(self.time_limit, (int, float)) and self.time_limit > 0 and math.isfinite(self.time_limit)):
            raise InvalidSpec(ARGUMENT, "time_limit", "must be a positive number of seconds")
        if not isinstance(self.threads, int) or self.threads < 1:
            raise InvalidSpec(ARGUMENT, "threads", "must be at least 1")
        if not isinstance(self.jobs, int) or self.jobs < 1:
            raise InvalidSpec(ARGUMENT, "jobs", "must be at least 1")
        if self.backend != "process":
            from placer.planning.tasks import check_backend

            check_backend(self.backend)     # an unknown backend, or Ray missing, before any solve

    def method_in(self, mode: str) -> str:
        """The method used in ``mode``: the asked one, else the search default of the mode."""
        return self.method or SEARCH_METHOD[mode]

    def options(self, method: str, objective: str | None = None, *, reports: bool = True) -> dict:
        """Keyword options of ``place(instance, method, ...)``: only CP-SAT takes a time limit,
        seed, threads, progress reports, the deadline and an objective."""
        if method != "cpsat":
            return {}
        opts = dict(time_limit=self.time_limit, seed=self.seed, threads=self.threads)
        if reports:
            opts.update(progress=self.progress, deadline=self.deadline)
        if objective is not None:
            opts["objective"] = objective
        return opts

    def replace(self, **changes) -> SolverSettings:
        return replace(self, **changes)
