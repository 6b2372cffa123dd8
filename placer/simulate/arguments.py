"""The arguments of a simulation run, checked and resolved: counts, the context distribution,
the speculation and the prefix-cache hit a run takes from its instance when not given."""

from __future__ import annotations

from placer.problem.instance import Instance
from placer.simulate.contexts import ContextDist, parse_context_dist
from placer.specs.errors import ARGUMENT, InvalidSpec
from placer.specs.units import parse_tokens

__all__ = ["spec_of", "cached_prompt", "check_counts", "context_dist"]


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
