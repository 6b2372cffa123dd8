"""The fleet plan file: several models to place on one fleet (``placer plan-fleet FILE``).

A YAML mapping::

    hardware: wse-3t          # catalog name or spec file (a file relative to the plan); -H replaces it
    racks: 32                 # optional: resize the fleet (--racks replaces it)
    objective: devices        # devices (default) or mw: the joint level minimised; requests: the most
                              #   requests/s, each model's replicas (at least its replicas:) within the budget
    budget: {devices: 64}     # optional: the most devices (or mw: megawatts) the plan may take
    share_devices: false      # default for every model: a device hosts layers of one model only
    models:
      - model: kimi-k3        # catalog name or spec file
        name: k3              # optional label (default the model's name); unique
        replicas: 1           # pipelines of this model, each on its own devices
        concurrency: 8        # the workload, as placer solve takes it: context, concurrency,
        context: 256k         #   weight_bits, kv_bits
        tp: [1]               # tensor-parallel degrees to try; ep, mode, runtime as in solve
        speculative: {tokens: 3, method: eagle3, draft_model: kimi-k3-eagle3, accept: 2.5}
        traffic: {isl: 8k, osl: 1k, cached_prompt: 50%}   # or a traffic YAML file
        min_user_tps: 50      # optional per-user speed floor (or max_itl_ms), max_ttft_ms beside it
        share: false          # this model's devices may host another sharing model's layers

Every error is an :class:`~placer.specs.errors.InvalidSpec` naming the file and the field
(``models[1].concurrency``), which the command line prints on one line and exits 2 for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from placer.planning.requirements import Placement, Requirements, SpecDecoding, Targets
from placer.specs.errors import InvalidSpec, PlacerError
from placer.specs.spec_io import load_yaml_or_json
from placer.specs.units import parse_tokens

__all__ = ["ModelEntry", "FleetPlanSpec", "read_fleet_plan", "fleet_plan_from_dict", "OBJECTIVES"]

OBJECTIVES = ("devices", "mw", "requests")
BUDGETS = ("devices", "mw")
_TOP = ("hardware", "racks", "objective", "budget", "share_devices", "models", "time_limit")
_MODEL = ("model", "name", "replicas", "concurrency", "context", "weight_bits", "kv_bits", "tp", "ep", "mode",
          "runtime", "speculative", "traffic", "min_user_tps", "max_itl_ms", "max_ttft_ms", "share")
_SPEC = ("tokens", "method", "draft_model", "accept")
_TRAFFIC = ("isl", "osl", "cached_prompt")


@dataclass(frozen=True)
class ModelEntry:
    """One model of a fleet plan: its graph, workload, requirements (placement, targets,
    speculation, traffic), ``replicas`` and whether its devices may be shared."""

    name: str
    model: object
    workload: object
    requirements: Requirements
    replicas: int = 1
    share: bool = False


@dataclass(frozen=True)
class FleetPlanSpec:
    """A fleet plan: ``models``, the ``hardware`` reference (None: the command line's -H), ``racks``,
    the joint ``objective`` (devices, mw or requests), an optional ``budget`` in ``budget_unit``
    (devices, or MW)."""

    models: tuple[ModelEntry, ...]
    hardware: str | None = None
    racks: int | None = None
    objective: str = "devices"
    budget: float | None = None
    budget_unit: str | None = None
    time_limit: float | None = None
    source: str = "<fleet plan>"
    notes: tuple[str, ...] = field(default=())


def read_fleet_plan(path) -> FleetPlanSpec:
    """The fleet plan at ``path`` (YAML or JSON, read as every spec is: a key given twice refused);
    :class:`InvalidSpec` naming the file and field."""
    p = Path(path)
    data, _text = load_yaml_or_json(p)
    return fleet_plan_from_dict(data, source=str(p), base=p.parent)


def _ref(value, base: Path | None) -> str:
    """A catalog name as it is; a relative file path that exists beside the plan, resolved there."""
    text = str(value)
    if base is not None and ("/" in text or text.endswith((".yaml", ".yml", ".json"))):
        p = base / text
        if p.exists():
            return str(p)
    return text


def _count(value, where: str, key: str, *, zero: bool = False) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < (0 if zero else 1):
        raise InvalidSpec(where, key, f"must be an integer >= {0 if zero else 1}, got {value!r}")
    return value


def _number(value, where: str, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or not math.isfinite(value):
        raise InvalidSpec(where, key, f"must be a positive number, got {value!r}")
    return float(value)


def _flag(value, where: str, key: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidSpec(where, key, f"must be true or false, got {value!r}")
    return value


def fleet_plan_from_dict(data, *, source: str = "<fleet plan>", base: Path | None = None) -> FleetPlanSpec:
    """The :class:`FleetPlanSpec` of ``data`` (a parsed plan file; ``base``: the folder file
    references are relative to)."""
    if not isinstance(data, dict):
        raise InvalidSpec(source, None, "must be a mapping with a models: list")
    for key in data:
        if key not in _TOP:
            raise InvalidSpec(source, str(key), f"unknown field (a fleet plan has {', '.join(_TOP)})")
    models = data.get("models")
    if not isinstance(models, list) or not models:
        raise InvalidSpec(source, "models", "must be a non-empty list of models")
    objective = data.get("objective", "devices")
    if objective not in OBJECTIVES:
        raise InvalidSpec(source, "objective", f"must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    budget, unit = _budget(data.get("budget"), objective, source)
    share = _flag(data.get("share_devices", False), source, "share_devices")
    entries = tuple(_entry(m, k, source, base, share) for k, m in enumerate(models))
    names = [e.name for e in entries]
    for k, n in enumerate(names):
        if n in names[:k]:
            raise InvalidSpec(source, f"models[{k}].name", f"{n!r} names two models (give each its own name:)")
    hardware = data.get("hardware")
    racks = data.get("racks")
    time_limit = data.get("time_limit")
    return FleetPlanSpec(entries, None if hardware is None else _ref(hardware, base),
                         None if racks is None else _count(racks, source, "racks"), objective, budget, unit,
                         None if time_limit is None else _number(time_limit, source, "time_limit"), source)


def _budget(value, objective: str, source: str) -> tuple[float | None, str | None]:
    """(the budget, its unit): devices or MW; a minimised objective's budget is in its own unit."""
    if value is None:
        return None, None
    if not isinstance(value, dict) or len(value) != 1 or next(iter(value)) not in BUDGETS:
        raise InvalidSpec(source, "budget", "must be one of {devices: N} or {mw: MW}")
    key, amount = next(iter(value.items()))
    if objective != "requests" and key != objective:
        raise InvalidSpec(source, f"budget.{key}", f"a budget in {key} needs objective: {key} (or requests)")
    amount = float(_count(amount, source, "budget.devices")) if key == "devices" else _number(amount, source, "budget.mw")
    return amount, key


def _entry(m, k: int, source: str, base: Path | None, share_default: bool) -> ModelEntry:
    from placer.specs.model import load_model
    from placer.specs.workload import workload_for

    at = f"models[{k}]"
    if not isinstance(m, dict):
        raise InvalidSpec(source, at, "must be a mapping with a model: field")
    for key in m:
        if key not in _MODEL:
            raise InvalidSpec(source, f"{at}.{key}", f"unknown field (a model has {', '.join(_MODEL)})")
    if "model" not in m:
        raise InvalidSpec(source, f"{at}.model", "missing: a catalog name or a model spec file")
    try:
        model = load_model(_ref(m["model"], base))
    except PlacerError as exc:
        raise InvalidSpec(source, f"{at}.model", str(exc)) from None
    workload_args = {}
    for key in ("concurrency", "weight_bits", "kv_bits"):
        if key in m:
            workload_args[key] = _count(m[key], source, f"{at}.{key}")
    if "context" in m:
        try:
            workload_args["context"] = parse_tokens(m["context"])
        except (ValueError, TypeError, InvalidSpec):
            raise InvalidSpec(source, f"{at}.context", f"tokens (256k), got {m['context']!r}") from None
    try:
        workload = workload_for(model, **workload_args)
        requirements = Requirements(placement=_placement(m, at, source), targets=_targets(m, at, source),
                                    speculation=_speculation(m.get("speculative"), at, source, base),
                                    traffic=_traffic(m.get("traffic"), at, source, base))
    except InvalidSpec as exc:
        if exc.source == source:
            raise
        raise InvalidSpec(source, f"{at}.{exc.field}", exc.message) from None
    return ModelEntry(str(m.get("name", model.name)), model, workload, requirements,
                      _count(m.get("replicas", 1), source, f"{at}.replicas"),
                      _flag(m.get("share", share_default), source, f"{at}.share"))


def _placement(m: dict, at: str, source: str) -> Placement:
    tp = m.get("tp")
    if tp is not None:
        tp = [tp] if isinstance(tp, int) and not isinstance(tp, bool) else tp
        if not isinstance(tp, list):
            raise InvalidSpec(source, f"{at}.tp", "a degree or a list of degrees")
        tp = tuple(_count(g, source, f"{at}.tp") for g in tp)
    ep = m.get("ep")
    return Placement(mode=m.get("mode"), degrees=tp, expert_parallel=None if ep is None else _flag(ep, source, f"{at}.ep"),
                     runtime=m.get("runtime"))


def _targets(m: dict, at: str, source: str) -> Targets:
    values = {key: _number(m[key], source, f"{at}.{key}") for key in ("min_user_tps", "max_itl_ms", "max_ttft_ms")
              if key in m}
    return Targets(**values)


def _speculation(value, at: str, source: str, base: Path | None) -> SpecDecoding | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidSpec(source, f"{at}.speculative", f"a mapping of {', '.join(_SPEC)}")
    for key in value:
        if key not in _SPEC:
            raise InvalidSpec(source, f"{at}.speculative.{key}", f"unknown field (one of {', '.join(_SPEC)})")
    draft = value.get("draft_model")
    if draft is not None:
        from placer.specs.model import load_model

        try:
            draft = load_model(_ref(draft, base))
        except PlacerError as exc:
            raise InvalidSpec(source, f"{at}.speculative.draft_model", str(exc)) from None
    try:
        return SpecDecoding(tokens=value.get("tokens", 0), method=value.get("method"), draft_model=draft,
                            accept=value.get("accept"))
    except InvalidSpec as exc:
        raise InvalidSpec(source, f"{at}.speculative.{exc.field.removeprefix('spec_')}", exc.message) from None


def _traffic(value, at: str, source: str, base: Path | None):
    """The model's :class:`~placer.simulate.arguments.Traffic`: prompt and output lengths (tokens,
    or a distribution uniform:LO-HI / lognormal:MEDIAN,SIGMA) and the prefix-cache hit; a string
    names a traffic YAML file (its isl, osl and cached_prompt fields)."""
    if value is None:
        return None
    where = f"{at}.traffic"
    if isinstance(value, str):
        import yaml

        path = Path(_ref(value, base))
        try:
            value = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise InvalidSpec(source, where, f"cannot read traffic file {path}: {exc}") from None
    if not isinstance(value, dict):
        raise InvalidSpec(source, where, f"a mapping of {', '.join(_TRAFFIC)}, or a traffic file")
    for key in value:
        if key not in _TRAFFIC:
            raise InvalidSpec(source, f"{where}.{key}", f"unknown field (one of {', '.join(_TRAFFIC)})")
    from placer.simulate.arguments import Traffic, parse_cached

    share, tokens = None, None
    if value.get("cached_prompt") is not None:
        try:
            share, tokens = parse_cached(value["cached_prompt"], "cached_prompt")
        except (ValueError, InvalidSpec) as exc:
            raise InvalidSpec(source, f"{where}.cached_prompt", getattr(exc, "message", str(exc))) from None
    return Traffic(prompt_tokens=_length(value.get("isl"), source, f"{where}.isl"),
                   output_tokens=_length(value.get("osl"), source, f"{where}.osl"),
                   cached_prompt_tokens=None if share is not None else tokens, cached_share=share)


def _length(value, source: str, where: str):
    if value is None:
        return None
    text = str(value).strip()
    try:
        if ":" in text:
            from placer.simulate.contexts import parse_context_dist

            d = parse_context_dist(text, where)
            return int(d.values[0]) if d.kind == "fixed" else d
        n = parse_tokens(text)
    except (ValueError, TypeError, InvalidSpec):
        raise InvalidSpec(source, where, f"{value!r}: tokens (8k) or a distribution (uniform:LO-HI, "
                                         f"lognormal:MEDIAN,SIGMA)") from None
    if n < 1:
        raise InvalidSpec(source, where, "must be at least 1 token")
    return n
