"""The workload a placement must hold: context, concurrency, precisions, micro-batch."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace

from placer.specs.errors import InvalidSpec
from placer.specs.units import parse_tokens

__all__ = ["Workload", "workload_for", "MAX_CONCURRENCY"]

# the most live requests a workload states (searches for a largest concurrency stop here)
MAX_CONCURRENCY = 10**9

_DEFAULTS = dict(context_tokens=8192, concurrency=1, weight_bits=16, kv_bits=16, state_bits=32,
                 conv_state_bits=16, activation_bits=16, micro_batch=1, weight_group_size=0,
                 weight_scale_bits=16)


@dataclass(frozen=True)
class Workload:
    """What every stage must hold at once.

    ``concurrency`` live requests of ``context_tokens`` each; weights at ``weight_bits`` (plus one
    ``weight_scale_bits`` scale per ``weight_group_size`` weights when that is > 0; off by default),
    KV cache at ``kv_bits``, recurrent state at ``state_bits``, short-conv state at
    ``conv_state_bits``, activations crossing a hop at ``activation_bits``. Layers whose spec gives
    the checkpoint's stored formats keep them while ``weights_as_stored`` (``--weight-bits`` clears it).
    """

    context_tokens: int = 8192
    concurrency: int = 1
    weight_bits: int = 16
    kv_bits: int = 16
    state_bits: int = 32
    conv_state_bits: int = 16
    activation_bits: int = 16
    micro_batch: int = 1
    weight_group_size: int = 0
    weight_scale_bits: int = 16
    # layers that know their checkpoint's stored formats use them; false once --weight-bits is given
    weights_as_stored: bool = True
    # the stored formats in use (their names, for output), when the model keeps some; not part of a mapping
    stored_formats: str = field(default="", compare=False)

    def __post_init__(self):
        if not isinstance(self.weights_as_stored, bool):
            raise InvalidSpec("<workload>", "weights_as_stored", f"expected true or false, got {self.weights_as_stored!r}")
        if not isinstance(self.stored_formats, str):
            raise InvalidSpec("<workload>", "stored_formats", f"expected a string, got {self.stored_formats!r}")
        for f in fields(self):
            if f.name in ("weights_as_stored", "stored_formats"):
                continue
            v = getattr(self, f.name)
            if not isinstance(v, int) or isinstance(v, bool):
                raise InvalidSpec("<workload>", f.name, f"expected an integer, got {v!r}")
        if self.context_tokens < 1:
            raise InvalidSpec("<workload>", "context_tokens", "must be at least 1 token")
        if self.context_tokens > 2**40:
            raise InvalidSpec("<workload>", "context_tokens", "beyond 2^40 tokens")
        if not 0 <= self.concurrency <= MAX_CONCURRENCY:
            raise InvalidSpec("<workload>", "concurrency", "must be between 0 and 1e9")
        for name in ("weight_bits", "kv_bits", "state_bits", "conv_state_bits", "activation_bits",
                     "weight_scale_bits"):
            if not 1 <= getattr(self, name) <= 64:
                raise InvalidSpec("<workload>", name, "bits must be between 1 and 64")
        if not 1 <= self.micro_batch <= 10**6:
            raise InvalidSpec("<workload>", "micro_batch", "must be between 1 and 1e6")
        if self.weight_group_size < 0:
            raise InvalidSpec("<workload>", "weight_group_size", "must not be negative")

    def replace(self, **changes) -> Workload:
        return replace(self, **changes)

    def to_dict(self) -> dict:
        d = asdict(self)
        del d["stored_formats"]
        if d["weights_as_stored"]:
            # the default: left out, so mappings written before stored formats existed read the same
            del d["weights_as_stored"]
        return d


def workload_for(model, *, context=None, concurrency=None, weight_bits=None, kv_bits=None,
                 state_bits=None, conv_state_bits=None, activation_bits=None, micro_batch=None,
                 weight_group_size=None) -> Workload:
    """The workload for ``model``: explicit values win, then the model's ``default_workload``, then defaults."""
    d = dict(_DEFAULTS)
    spec_defaults = dict(getattr(model, "default_workload", {}) or {})
    if "context" in spec_defaults:
        spec_defaults["context_tokens"] = spec_defaults.pop("context")
    d.update(spec_defaults)
    given = dict(context_tokens=None if context is None else parse_tokens(context), concurrency=concurrency,
                 weight_bits=weight_bits, kv_bits=kv_bits, state_bits=state_bits,
                 conv_state_bits=conv_state_bits, activation_bits=activation_bits,
                 micro_batch=micro_batch, weight_group_size=weight_group_size)
    d.update({k: v for k, v in given.items() if v is not None})
    if weight_bits is not None:
        d["weights_as_stored"] = False
    if d.get("weights_as_stored", True):
        used = {g.format for x in getattr(model, "layers", ()) for g in x.weight_groups}
        d["stored_formats"] = ", ".join(sorted(used))
    return Workload(**d)
