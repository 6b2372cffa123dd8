"""Options and loaders shared by the commands."""

from __future__ import annotations

import json
import os
import sys

import click

from placer.specs.errors import InvalidSpec
from placer.specs.fleet import Fleet, load_fleet
from placer.specs.model import LayerGraph, load_model
from placer.specs.units import format_tokens, parse_tokens
from placer.specs.workload import Workload, workload_for

__all__ = ["workload_options", "text_only_option", "kv_cache_note", "warn_workload", "hardware_option", "load_inputs", "echo_json", "group_label", "context_type", "warn",
           "workload_doc", "workload_text", "workload_notes",
           "output_file", "input_file", "image_file", "threads_option", "jobs_option", "renamed", "granularity_option",
           "Progress", "quiet_option", "stderr_is_terminal", "parallel_options", "redundant_experts_option", "parse_degrees", "reserve_of",
           "reserve_text", "power_options", "power_choice", "load_fleet_chosen", "speculative_options", "spec_decoding",
           "speculation_text", "cached_prompt_option", "drafts_with_mtp"]


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


class _OutputFile(click.ParamType):
    """A file to write: refused in the one error format when it names a directory (checked before
    any work, so nothing is solved for a path that cannot be written)."""

    name = "FILE"

    def convert(self, value, param, ctx):
        if os.path.isdir(value):
            raise InvalidSpec(str(value), None, f"is a directory; {param.opts[0] if param else 'the option'} "
                                                f"needs a file path")
        return value


class _InputFile(click.ParamType):
    """A file to read; its reader reports a missing file, a directory or bad content in the one format."""

    name = "FILE"

    def convert(self, value, param, ctx):
        return value


class _ImageFile(_OutputFile):
    """An image to write: a file path whose suffix is an image format (none: PNG)."""

    def convert(self, value, param, ctx):
        from placer.plotting import image_format

        value = super().convert(value, param, ctx)
        try:
            image_format(value)
        except ValueError as exc:
            raise InvalidSpec(str(value), None, str(exc)) from None
        return value


output_file = _OutputFile()
image_file = _ImageFile()
input_file = _InputFile()


def granularity_option(f):
    """``--granularity``: how split mode refines layers; one default for every command."""
    from placer.planning.studies.compare import SPLIT_GRANULARITY

    return click.option("--granularity", default=None,
                        help=f"Split mode's refinement: layer, block or shards:N (default {SPLIT_GRANULARITY}); "
                             f"other modes place whole layers.")(f)


def workload_options(f):
    """--context --concurrency --weight-bits --kv-bits --state-bits --micro-batch --racks --mtp --text-only."""
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
        click.option("--mtp", is_flag=True, default=False,
                     help="Include the model's multi-token-prediction layers (off by default)."),
        text_only_option(),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def text_only_option(help: str = "Drop a multimodal model's vision/audio tower (plan the text model alone)."):
    """``--text-only``: every command that loads a model accepts it (:func:`placer.specs.model.load_model`)."""
    return click.option("--text-only", is_flag=True, default=False, help=help)


def method_option(default: str | None = None, help: str = "Placement method (default: dp for contiguous, cpsat "
                                                           "otherwise)."):
    """``--method``: one of the registry's placing methods (:data:`placer.algorithms.PLACING_METHODS`);
    ``default`` None leaves the choice to the command (:func:`placer.planning.budget.default_method`)."""
    from placer.algorithms.registry import PLACING_METHODS

    return click.option("--method", type=click.Choice(PLACING_METHODS), default=default,
                        show_default=default is not None, help=help)


def time_limit_option(help: str):
    """``--time-limit SECONDS``: CP-SAT's budget, 30 s unless told; ``help`` says what it covers."""
    return click.option("--time-limit", type=click.FloatRange(0, min_open=True), default=30.0, show_default=True,
                        help=help)


def threads_option(f):
    """``--threads N``: CP-SAT search threads (``--workers`` is its deprecated, hidden spelling)."""
    f = click.option("--threads", type=click.IntRange(1, 256), default=None,
                     help="CP-SAT search threads per solve (default 2).")(f)
    return click.option("--workers", "workers_deprecated", type=click.IntRange(1, 256), default=None,
                        hidden=True)(f)


def jobs_option(f):
    """``--jobs N``: processes (or Ray tasks) solving points at once (``--workers`` is its deprecated,
    hidden spelling)."""
    f = click.option("--jobs", "-j", type=click.IntRange(1, 4096), default=None,
                     help="Points solved at once, one process each (default: all cores; 1 solves in this "
                          "process).")(f)
    return click.option("--workers", "workers_deprecated", type=click.IntRange(1, 4096), default=None,
                        hidden=True)(f)


def renamed(new_flag: str, new_value, old_value, default=None):
    """The value of ``new_flag``, or of its old spelling ``--workers`` (with a warning), or ``default``."""
    if old_value is not None:
        if new_value is not None and new_value != old_value:
            raise InvalidSpec("--workers", "workers", f"conflicts with {new_flag} {new_value}")
        warn(f"--workers: workers: deprecated; say {new_flag} {old_value}")
        return old_value
    return default if new_value is None else new_value
def parallel_options(f):
    """--tp --ep --reserve: stages as groups of devices of one node, and the runtime's reserve."""
    opts = [
        click.option("--tp", "tp", default=None, metavar="LIST",
                     help="Tensor-parallel degrees to try, e.g. 1,2,4,8 (devices per stage, one node; "
                          "uniform across stages; with --ep or --attention-dp a multiple of the node size "
                          "spans whole nodes). Default: the divisors of the node size the model's "
                          "heads allow (1 on wafer fleets)."),
        click.option("--ep", is_flag=True, help="Expert parallelism: experts spread whole across a stage's "
                                                "devices (default: every expert tensor-split)."),
        click.option("--reserve", default=None, metavar="R",
                     help="Memory held back on every device for the runtime: a fraction (0.1), bytes "
                          "(8 GB) or both (0.1+3.5GB). Default: the hardware spec's (GPUs: vLLM's share)."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def redundant_experts_option(f):
    """``--redundant-experts N``: extra copies of routed experts per MoE layer (:mod:`placer.specs.experts`)."""
    return click.option("--redundant-experts", "redundant_experts", type=click.IntRange(0, 100000), default=None,
                        metavar="N",
                        help="Redundant experts per MoE layer, as SGLang's --ep-num-redundant-experts and vLLM's "
                             "EPLB num_redundant_experts: E + N physical experts spread whole, (E + N) / tp a "
                             "rank; needs --ep or --attention-dp (default 0).")(f)


def parse_degrees(text) -> list[int] | None:
    """``--tp`` as a list of degrees (None: the default)."""
    from placer.specs.units import parse_int_list

    if text is None or str(text).strip() in ("", "auto"):
        return None
    try:
        values = parse_int_list(text)
    except ValueError as exc:
        raise InvalidSpec("--tp", "tp", str(exc)) from None
    bad = [v for v in values if v < 1]
    if bad:
        raise InvalidSpec("--tp", "tp", f"a degree is a positive integer, got {bad[0]}")
    return values


def reserve_of(text):
    """``--reserve`` as a :class:`placer.specs.reserve.Reserve` (None: the hardware spec's)."""
    from placer.specs.reserve import parse_reserve

    if text is None:
        return None
    try:
        return parse_reserve(text)
    except ValueError as exc:
        raise InvalidSpec("--reserve", "reserve", str(exc)) from None


def hardware_option(required: bool = False):
    """``--hardware`` plus the power boundary its figures are counted at (:func:`power_options`)."""
    def add(f):
        f = power_options(f)
        return click.option("--hardware", "-H", "hardware", required=required, default=None,
                            help="Hardware catalog name or spec file.")(f)
    return add


def _remember(ctx, param, value):
    if value is not None:
        ctx.meta[f"placer.{param.name}"] = value
    return value


def power_options(f):
    """``--power chip|system|facility`` and ``--pue``: where power, tokens/s per MW and J/token are
    counted. They reach every fleet the command loads (:func:`power_choice`, :func:`load_inputs`)
    without a parameter of the command's own."""
    from placer.specs.fleet import DEFAULT_POWER_BOUNDARY, DEFAULT_PUE, POWER_BOUNDARIES

    f = click.option("--pue", type=click.FloatRange(1.0, 5.0), default=None, expose_value=False, callback=_remember,
                     help=f"Facility boundary: power usage effectiveness (default {DEFAULT_PUE}, the industry "
                          f"average of the Uptime Institute Global Data Center Survey 2024).")(f)
    return click.option("--power", type=click.Choice(POWER_BOUNDARIES), default=None, expose_value=False,
                        callback=_remember,
                        help=f"Where power is counted: chip (the accelerator alone), system (its share of its "
                             f"DGX / CS-3 system: hosts, NICs, switches, fans) or facility (system x --pue). "
                             f"Default {DEFAULT_POWER_BOUNDARY}.")(f)


def power_choice() -> tuple[str | None, float | None]:
    """(``--power``, ``--pue``) of the running command; (None, None) when not given."""
    ctx = click.get_current_context(silent=True)
    meta = ctx.meta if ctx is not None else {}
    return meta.get("placer.power"), meta.get("placer.pue")


def load_fleet_chosen(ref, **kw) -> Fleet:
    """:func:`placer.specs.fleet.load_fleet` at the power boundary the command line chose
    (:meth:`placer.specs.fleet.Fleet.power_notes` says where a spec gives no figure for it)."""
    power, pue = power_choice()
    if power is not None:
        kw["power"] = power
    return load_fleet(ref, pue=pue, **kw)


def load_inputs(model_ref, hardware_ref=None, **kw) -> tuple[LayerGraph, Fleet | None, Workload]:
    """Model, fleet (or None) and workload from command-line values."""
    model = load_model(model_ref, mtp=bool(kw.get("mtp")), text_only=bool(kw.get("text_only")))
    if kw.get("redundant_experts"):
        from placer.specs.experts import with_redundant_experts

        try:
            model = with_redundant_experts(model, kw["redundant_experts"])
        except ValueError as exc:
            raise InvalidSpec("--redundant-experts", "redundant_experts", str(exc)) from None
    fleet = load_fleet_chosen(hardware_ref, racks=kw.get("racks")) if hardware_ref else None
    if kw.get("racks") and not hardware_ref:
        raise InvalidSpec("--racks", "racks", "needs --hardware")
    wl = workload_for(model, context=kw.get("context"), concurrency=kw.get("concurrency"),
                      weight_bits=kw.get("weight_bits"), kv_bits=kw.get("kv_bits"),
                      state_bits=kw.get("state_bits"), conv_state_bits=kw.get("conv_state_bits"),
                      micro_batch=kw.get("micro_batch"), weight_group_size=kw.get("weight_group_size"))
    warn_workload(model, wl, kw.get("kv_bits"))
    for note in model.notes:
        # what the model's spec says about itself (an import's workload defaults, a tower, MTP layers)
        if note.startswith("warning: "):
            warn(f"{model.name}: {note.removeprefix('warning: ')}")
        elif not (note.startswith("imported workload defaults") and kw.get("context") is not None
                and kw.get("concurrency") is not None):
            click.echo(f"note: {model.name}: {note}", err=True)
    return model, fleet, wl


def warn(text: str) -> None:
    """``warning: <name>: <field>: <what>`` on stderr: the error format, for something allowed but odd."""
    click.echo(f"warning: {text}", err=True)


def workload_notes(model: LayerGraph, wl: Workload) -> list[str]:
    """What the workload asks that is allowed but probably not meant, one ``<name>: <field>: <what>``
    each: zero live requests (a plan of weights alone), a context past the model's trained window."""
    notes = []
    if wl.concurrency == 0:
        notes.append("--concurrency: concurrency: 0 live requests: the plan holds the weights alone, with no "
                     "KV cache or state reserved, and serves no request")
    limit = getattr(model, "max_context_tokens", None)
    if limit and wl.context_tokens > limit:
        notes.append(f"--context: context: {wl.context_tokens:,} tokens is beyond {model.name}'s "
                     f"{limit:,}-token window (max_position_embeddings); the memory is planned as asked")
    return notes


def warn_workload(model: LayerGraph, wl: Workload, kv_bits: int | None) -> None:
    """On stderr: what the workload asks that is probably not meant (:func:`workload_notes`) and the
    KV cache's precision against the checkpoint's format (:func:`kv_cache_note`)."""
    for note in workload_notes(model, wl):
        warn(note)
    kv_note = kv_cache_note(model, wl, kv_bits)
    if kv_note:
        click.echo(f"note: {model.name}: {kv_note}", err=True)


def kv_cache_note(model: LayerGraph, wl: Workload, kv_bits: int | None) -> str:
    """One line on the KV cache's precision when the checkpoint states its KV format (an import
    records it as ``kv_cache_format``): planned at that format's bits, or ``--kv-bits`` overriding it.
    Empty when the spec states no format or the model keeps no KV cache."""
    fmt = getattr(model, "kv_cache_format", "")
    if not fmt or not any(x.has_kv for x in model.layers):
        return ""
    stated = (model.default_workload or {}).get("kv_bits")
    if kv_bits is not None and kv_bits != stated:
        return f"KV cache at {wl.kv_bits} bits (--kv-bits {kv_bits}), not the checkpoint's {stated}-bit format {fmt}"
    return f"KV cache at {wl.kv_bits} bits, the checkpoint's format: {fmt}; --kv-bits overrides"


def workload_doc(wl: Workload) -> dict:
    """The workload as every command's JSON states it (``Workload.to_dict()``: context, concurrency,
    precisions, micro-batch, weight groups)."""
    return wl.to_dict()


def reserve_text(fleet=None, reserve=None) -> str:
    """The runtime reserve as one phrase: ``--reserve``'s, else each device type's on ``fleet``."""
    if reserve is not None:
        return f"{reserve.describe()} per device (--reserve)"
    if fleet is None:
        return "as the hardware spec says"
    from placer.specs.units import format_bytes

    types = list(fleet.device_types.values())
    if all(t.reserve.is_zero for t in types):
        return "none"
    return ", ".join(f"{t.name} {format_bytes(t.reserve_bytes)} ({t.reserve.describe()})" for t in types) \
        + " per device"


def workload_text(wl: Workload | dict, *, per_row: tuple[str, ...] = (), concurrency: str | None = None,
                  fleet=None, reserve=None) -> str:
    """The workload in one line of human output: context, concurrency, every precision, reserve
    (:func:`reserve_text` of ``fleet`` and a ``--reserve`` override).

    ``per_row`` names the fields a grid varies (``context``, ``concurrency``, ``weight_bits``,
    ``kv_bits``), printed as "per row"; ``concurrency`` replaces the concurrency text."""
    if isinstance(wl, dict):
        wl = Workload(**{k: v for k, v in wl.items() if k in Workload.__dataclass_fields__})

    def field(name, text):
        return "per row" if name in per_row else text

    group = f", one scale per {wl.weight_group_size} weights" if wl.weight_group_size else ""
    context = field("context", f"{format_tokens(wl.context_tokens)} ({wl.context_tokens:,} tokens)")
    weights = f"as stored ({wl.stored_formats})" if wl.weights_as_stored and wl.stored_formats else \
        f"{field('weight_bits', f'{wl.weight_bits}-bit')}{group}"
    return (f"workload: context {context}, "
            f"concurrency {concurrency or field('concurrency', str(wl.concurrency))}, "
            f"weights {weights}, "
            f"KV {field('kv_bits', f'{wl.kv_bits}-bit')}, "
            f"state {wl.state_bits}-bit (conv {wl.conv_state_bits}-bit), activations {wl.activation_bits}-bit, "
            f"micro-batch {wl.micro_batch}; runtime reserve {reserve_text(fleet, reserve)}")


def group_label(devices) -> str:
    """``r0g0-7`` for the devices r0g0..r0g7 of one node, the single id for a group of one."""
    if len(devices) == 1:
        return devices[0]
    first, last = devices[0], devices[-1]
    head = first.rstrip("0123456789")
    return f"{first}-{last[len(head):]}" if last.startswith(head) else f"{first}+{len(devices) - 1}"


def echo_json(doc) -> None:
    click.echo(json.dumps(doc, indent=2, sort_keys=False))


def stderr_is_terminal() -> bool:
    """Whether a person watches stderr (progress bars are drawn only then)."""
    return bool(getattr(sys.stderr, "isatty", lambda: False)())


def backend_options(f):
    """``--backend process|ray`` and ``--address``: where independent solves (a plan's layouts, a
    study's points) run (:func:`placer.planning.tasks.run_tasks`)."""
    f = click.option("--backend", type=click.Choice(["process", "ray"]), default="process", show_default=True,
                     help="Run the independent solves (layouts, points) in worker processes or as Ray tasks, "
                          "one each (the ray extra); Ray's start-up pays only on a cluster of many machines.")(f)
    return click.option("--address", default=None, help="Ray cluster address (default: start a local one).")(f)


def quiet_option(f):
    """``--quiet``: no progress bar or progress lines on stderr (they are off anyway when stderr is
    not a terminal)."""
    return click.option("--quiet", "-q", is_flag=True, help="No progress on stderr.")(f)


class Progress:
    """A progress bar on stderr (tqdm): items done of ``total`` (None: unknown), failures, rate and
    ETA; nothing at all when ``quiet`` or stderr is not a terminal. Use as a context manager."""

    def __init__(self, total: int | None, unit: str, *, quiet: bool = False, desc: str = "",
                 failures: bool = True):
        self.failed = 0
        self.failures = failures
        self.bar = None
        if not quiet and stderr_is_terminal():
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit=f" {unit}", desc=desc, file=sys.stderr,
                            dynamic_ncols=True, leave=True, smoothing=0.1,
                            bar_format="{desc}{percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt}{unit} "
                                       "[{elapsed}<{remaining}, {rate_fmt}]{postfix}"
                            if total else "{desc}{n_fmt}{unit} [{elapsed}, {rate_fmt}]{postfix}")
            if failures:
                self.bar.set_postfix_str("0 failed", refresh=False)

    def step(self, *, failed: bool = False, desc: str | None = None) -> None:
        """One more item done (``failed``: it ended without an answer)."""
        self.failed += bool(failed)
        if self.bar is not None:
            if desc is not None:
                self.bar.set_description_str(desc, refresh=False)
            if self.failures:
                self.bar.set_postfix_str(f"{self.failed} failed", refresh=False)
            self.bar.update(1)

    def describe(self, desc: str) -> None:
        """What is being worked on now."""
        if self.bar is not None:
            self.bar.set_description_str(desc)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def echo_json_mapping(doc, where: str, code: int) -> int:
    """``--json``: the document on stdout, where the mapping went on stderr; returns ``code``."""
    echo_json(doc)
    click.echo(where, err=True)
    return code


def stopped(doc: dict, what: str, *, err: bool) -> int:
    """130 (saying so) when ``doc`` says Ctrl-C stopped the work after ``what``, else 0."""
    if not doc.get("interrupted"):
        return 0
    click.echo(f"interrupted: the {what} solved so far", err=err)
    return 130


def write_mapping_if_asked(output, doc, *, what: str = "") -> str:
    """Write the mapping ``doc`` atomically to ``output`` when the user asked (``-o``) and there is
    one; returns the line that says where it went (``what`` qualifies the file, e.g. one replica)."""
    if output and doc is not None:
        from placer.mapping import write_mapping
        write_mapping(output, doc)
        return f"wrote {output}{what}"
    return "mapping not written (-o FILE writes it)"


def runtime_option(fn):
    """``--runtime vllm|sglang|megatron|torch``: plan what that runtime runs as written (its rules are
    constraints of the model, proven like any other; placer.problem.runtime_rules)."""
    from placer.problem.runtime_rules import RUNTIMES

    return click.option("--runtime", type=click.Choice(RUNTIMES), default=None,
                        help="Plan for this runtime: its rules (a decoder layer on every pipeline rank, the "
                             "embedding first and the head last, one degree for every stage, contiguous "
                             "stages) become constraints of the model, proven like any other.")(fn)


def speculative_options(f):
    """``--spec-tokens K``, ``--spec-method``, ``--draft-model SPEC``, ``--spec-accept A``: speculative
    decoding the plan is made for (placer.specs.speculative), its drafter placed with the LM head."""
    from placer.specs.speculative import SPEC_METHODS

    f = click.option("--spec-accept", type=float, default=None, metavar="A",
                     help="Acceptance length: mean tokens a verify step emits (default: the published figure "
                          "for the model's family and method, placer/data/speculative.yaml).")(f)
    f = click.option("--draft-model", default=None, metavar="SPEC",
                     help="A draft model (catalog name, spec or config.json) placed with the LM head on the "
                          "last stage: an EAGLE-3 head (--spec-method eagle3) or a small model (draft_model).")(f)
    f = click.option("--spec-method", type=click.Choice(SPEC_METHODS), default=None,
                     help="How drafts are made: mtp (the model's own MTP layers, placed without --mtp), eagle3 or "
                          "draft_model (default: draft_model with --draft-model, else mtp).")(f)
    return click.option("--spec-tokens", type=click.IntRange(1, 64), default=None, metavar="K",
                        help="Speculative decoding: K draft tokens per step, verified as K + 1 positions; the "
                             "drafter's weights and KV are placed on the LM head's stage.")(f)


def cached_prompt_option(f):
    """``--cached-prompt TOKENS``: of every prompt, the leading tokens a prefix cache holds."""
    return click.option("--cached-prompt", "cached_prompt", type=context_type, default=None, metavar="TOKENS",
                        help="Of every prompt, this many leading tokens are a prefix-cache hit (an agent's "
                             "repeated context): their KV is in place, only the rest is prefilled (default 0).")(f)


def drafts_with_mtp(spec_tokens, draft_model, spec_method) -> bool:
    """Whether the speculation flags draft with the model's own MTP layers (which are then placed)."""
    return bool(spec_tokens) and draft_model is None and spec_method in (None, "mtp")


def spec_decoding(spec_tokens, spec_method, draft_model, spec_accept):
    """The :class:`~placer.planning.SpecDecoding` the speculation flags ask for (None: none), the
    draft model ``--draft-model`` names loaded; refused (naming the flag's field) as the
    requirements refuse it."""
    from placer.planning import SpecDecoding

    if not spec_tokens and spec_method is None and draft_model is None and spec_accept is None:
        return None
    draft = None if draft_model is None else load_model(draft_model)
    return SpecDecoding(tokens=spec_tokens or 0, method=spec_method, draft_model=draft, accept=spec_accept)


def speculation_text(doc: dict) -> str:
    """One line: the speculation a mapping states, or its MTP layers placed without one."""
    spec = doc.get("speculative")
    mtp = "the" if doc["model"].get("mtp") else "no"
    where = "on the LM head's stage (mtp-with-head)" if "mtp-with-head" in doc.get("require", ()) else "placed"
    if not spec:
        return f"{mtp} MTP layers {where}; no speculative decoding asked (--spec-tokens K)"
    what = "the model's MTP layers" if spec["method"] == "mtp" else f"{spec['method']} draft {spec['draft']['name']}"
    accept = spec.get("accept")
    return (f"speculative decoding: {spec['tokens']} draft token(s) per step with {what}, drafter {where}; "
            f"acceptance length " + (f"{accept:g} ({spec.get('accept_source')})" if accept is not None
                                     else "not known (give --spec-accept)"))
