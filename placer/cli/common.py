"""Options and loaders shared by the commands."""

from __future__ import annotations

import json

import click

from ..errors import InvalidSpec
from ..fleet import Fleet, load_fleet
from ..model import LayerGraph, load_model
from ..units import parse_tokens
from ..workload import Workload, workload_for

__all__ = ["workload_options", "hardware_option", "load_inputs", "echo_json", "context_type"]


class _Tokens(click.ParamType):
    name = "TOKENS"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        try:
            return parse_tokens(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


context_type = _Tokens()


def workload_options(f):
    """--context --concurrency --weight-bits --kv-bits --state-bits --micro-batch --racks."""
    opts = [
        click.option("--context", type=context_type, default=None, help="Context tokens per request, e.g. 256k."),
        click.option("--concurrency", type=click.IntRange(0, 10**9), default=None,
                     help="Target live requests every stage must hold."),
        click.option("--weight-bits", type=click.IntRange(1, 64), default=None),
        click.option("--kv-bits", type=click.IntRange(1, 64), default=None),
        click.option("--state-bits", type=click.IntRange(1, 64), default=None,
                     help="Precision of recurrent state (conv state stays at --conv-state-bits)."),
        click.option("--conv-state-bits", type=click.IntRange(1, 64), default=None),
        click.option("--micro-batch", type=click.IntRange(1, 10**6), default=None),
        click.option("--weight-group-size", type=click.IntRange(0, 10**9), default=None,
                     help="Add one 16-bit scale per this many weights (0 = off)."),
        click.option("--racks", type=click.IntRange(1, 100000), default=None, help="Resize the fleet."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def hardware_option(required: bool = False):
    return click.option("--hardware", "-H", "hardware", required=required, default=None,
                        help="Hardware catalog name or spec file.")


def load_inputs(model_ref, hardware_ref=None, **kw) -> tuple[LayerGraph, Fleet | None, Workload]:
    """Model, fleet (or None) and workload from command-line values."""
    model = load_model(model_ref)
    fleet = load_fleet(hardware_ref, racks=kw.get("racks")) if hardware_ref else None
    if kw.get("racks") and not hardware_ref:
        raise InvalidSpec("--racks", "racks", "needs --hardware")
    wl = workload_for(model, context=kw.get("context"), concurrency=kw.get("concurrency"),
                      weight_bits=kw.get("weight_bits"), kv_bits=kw.get("kv_bits"),
                      state_bits=kw.get("state_bits"), conv_state_bits=kw.get("conv_state_bits"),
                      micro_batch=kw.get("micro_batch"), weight_group_size=kw.get("weight_group_size"))
    return model, fleet, wl


def echo_json(doc) -> None:
    click.echo(json.dumps(doc, indent=2, sort_keys=False))
