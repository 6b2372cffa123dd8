"""Speculative decoding as a plan states it: the drafter's nodes, the draft tokens, the acceptance length.

A plan drafts with the model's own multi-token-prediction (MTP) layers (``method="mtp"``: the
checkpoint ships them, ``num_nextn_predict_layers``), an EAGLE-3 head (``"eagle3"``) or a small
draft model (``"draft_model"``). The drafter's weights and KV cache are placed as nodes of the
target's graph (:func:`with_draft`), on the stage of the LM head: vLLM and SGLang build the
drafter on the last pipeline rank only (``vllm/v1/worker/gpu_model_runner.py``, 0.33.0: ``if
self.speculative_config and get_pp_group().is_last_rank``; the draft's own parallel config has
``pipeline_parallel_size=1``; SGLang 0.5.23 ``speculative/eagle_worker_v2.py``: "Only the last PP
stage runs the draft"), which the requirement ``mtp-with-head`` makes every exact method honour.

The acceptance length (mean tokens a verify step emits: accepted drafts plus the bonus token) is
an input; :func:`default_accept` gives the published figure for the model's family and method
from ``placer/data/speculative.yaml`` (every row with its source and status mark).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

from placer.specs.errors import ARGUMENT, InvalidSpec
from placer.specs.model import DRAFT_EMBEDDING, DRAFT_PREFIX, Layer, LayerGraph, is_draft_node, mtp_count

__all__ = ["SPEC_METHODS", "Speculation", "AcceptRow", "with_draft", "with_draft_embedding", "needs_draft_embedding",
           "default_accept", "accept_table", "speculation_for"]

SPEC_METHODS = ("mtp", "eagle3", "draft_model")
_DATA = Path(__file__).resolve().parent / "data" / "speculative.yaml"


@dataclass(frozen=True)
class AcceptRow:
    """One published acceptance measurement (``placer/data/speculative.yaml``)."""

    family: str
    architectures: tuple[str, ...]
    method: str
    accept: tuple[tuple[int, float], ...]      # (draft tokens k, acceptance length), k ascending
    status: str
    setting: str
    source: str
    hidden_size: int | None = None

    def at(self, k: int) -> tuple[int, float] | None:
        """(measured k, acceptance length) at the largest measured k <= ``k``, or None."""
        below = [(m, a) for m, a in self.accept if m <= k]
        return below[-1] if below else None

    def matches(self, model: LayerGraph, method: str) -> bool:
        return (method == self.method and model.architecture in self.architectures
                and (self.hidden_size is None or self.hidden_size == model.hidden_size))


@cache
def accept_table(path: str | None = None) -> tuple[AcceptRow, ...]:
    """The rows of the acceptance table (default ``placer/data/speculative.yaml``)."""
    from placer.specs.spec_io import load_yaml_or_json

    source = path or str(_DATA)
    data, _ = load_yaml_or_json(Path(source))
    rows = []
    for k, r in enumerate(data.get("rows", [])):
        try:
            accept = tuple(sorted((int(m), float(a)) for m, a in r["accept"].items()))
            row = AcceptRow(family=str(r["family"]), architectures=tuple(r["architectures"]), method=str(r["method"]),
                            accept=accept, status=str(r["status"]), setting=str(r["setting"]),
                            source=str(r["source"]), hidden_size=r.get("hidden_size"))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InvalidSpec(source, f"rows.{k}", f"malformed row ({exc})") from None
        if row.method not in SPEC_METHODS or any(m < 1 or not 1.0 <= a <= m + 1 for m, a in accept):
            raise InvalidSpec(source, f"rows.{k}", "method must be one of "
                              f"{', '.join(SPEC_METHODS)} and each acceptance length between 1 and k + 1")
        rows.append(row)
    return tuple(rows)


def default_accept(model: LayerGraph, method: str, k: int) -> tuple[float, AcceptRow, int] | None:
    """(acceptance length, its row, the k it was measured at) for ``model``'s family drafting
    ``k`` tokens with ``method``: among the matching rows, the one measured at the largest k not
    above ``k`` (ties: the first row). None when no row applies."""
    best = None
    for row in accept_table():
        if row.matches(model, method) and (hit := row.at(k)) is not None:
            if best is None or hit[0] > best[2]:
                best = (hit[1], row, hit[0])
    return best


def with_draft(model: LayerGraph, draft: LayerGraph) -> LayerGraph:
    """``model`` with ``draft``'s nodes placed beside its own: every node of ``draft`` renamed
    ``draft.<name>``, its decoder layers made kind ``mtp`` (drafting layers: no decoder index of
    the target), inserted before the target's LM head (the graph stays a chain when both are)."""
    if not draft.layers:
        raise InvalidSpec(ARGUMENT, "draft_model", f"{draft.name} has no layers")
    renamed: list[Layer] = []
    for x in draft.layers:
        kind = "mtp" if x.index is not None else x.kind
        renamed.append(replace(x, name=DRAFT_PREFIX + x.name, kind=kind, index=None,
                               parent=None if x.parent is None else DRAFT_PREFIX + x.parent))
    heads = [i for i, x in enumerate(model.layers) if x.kind == "lm_head"]
    at = heads[0] if heads else len(model.layers)
    layers = (*model.layers[:at], *renamed, *model.layers[at:])
    n, m = len(model.layers), len(renamed)

    def moved(i: int) -> int:
        return i if i < at else i + m
    edges = [(moved(u), moved(v)) for u, v in model.edges]
    if model.is_chain and draft.is_chain:
        edges = [(i, i + 1) for i in range(n + m - 1)]
    else:
        # the draft's own edges, and its sources fed by the node before the head
        edges += [(at + u, at + v) for u, v in draft.edges]
        if at > 0:
            has_in = {v for _, v in draft.edges}
            edges += [(at - 1, at + s) for s in range(m) if s not in has_in]
        edges = sorted(set(edges))
    note = (f"draft model {draft.name}: {m} node(s) placed with the LM head (the last stage), named "
            f"{DRAFT_PREFIX}...")
    return replace(model, layers=layers, edges=tuple(edges), notes=(*model.notes, note))


def needs_draft_embedding(model: LayerGraph) -> bool:
    """True when ``model``'s drafter would hold its own copy of the vocabulary embedding on a
    pipeline of more than one rank: it has draft nodes, the target an embedding node, and the
    drafter none of its own. vLLM 0.33.0 shares the target's embedding with the drafter only when
    the pipeline size is 1 (``v1/spec_decode/llm_base_proposer.py::_maybe_share_embeddings``:
    otherwise "The draft model's vocab embedding will be loaded separately"); SGLang 0.5.23 loads
    the checkpoint's input embedding into the draft on the last stage, where the target's is a
    ``PPMissingLayer`` (``speculative/pp_draft_embedding.py``)."""
    drafts = [x for x in model.layers if is_draft_node(x)]
    if not drafts or any(x.name == DRAFT_EMBEDDING for x in drafts):
        return False
    own = any(x.kind == "embedding" for x in drafts)
    return not own and any(x.kind == "embedding" for x in model.layers)


def with_draft_embedding(model: LayerGraph) -> LayerGraph:
    """``model`` with the drafter's copy of the target's embedding (:data:`~placer.specs.model.DRAFT_EMBEDDING`,
    the same tensor at the same precision) just before its first draft node, so it is placed with
    the drafter on the last stage. ``model`` itself when :func:`needs_draft_embedding` is False."""
    if not needs_draft_embedding(model):
        return model
    embedding = next(x for x in model.layers if x.kind == "embedding" and not is_draft_node(x))
    at = next(i for i, x in enumerate(model.layers) if is_draft_node(x))
    copy = replace(embedding, name=DRAFT_EMBEDDING, parent=None)
    layers = (*model.layers[:at], copy, *model.layers[at:])
    if model.is_chain:
        edges = tuple((i, i + 1) for i in range(len(layers) - 1))
    else:
        shifted = [(u + (u >= at), v + (v >= at)) for u, v in model.edges]
        edges = tuple(sorted({*shifted, *((at - 1, at),) * (at > 0)}))
    note = (f"{DRAFT_EMBEDDING}: the drafter's own copy of the vocabulary embedding, placed with it on the last "
            "stage (vLLM and SGLang load it there when the pipeline has more than one rank)")
    return replace(model, layers=layers, edges=edges, notes=(*model.notes, note))


@dataclass(frozen=True)
class Speculation:
    """Speculative decoding a plan is made for: ``method`` (:data:`SPEC_METHODS`), ``tokens``
    drafted per step (k), ``accept`` the acceptance length (None: not known; the simulator then
    needs one), where ``accept`` comes from (``accept_source``), and the draft model for
    ``eagle3`` / ``draft_model`` (its name, spec hash and source)."""

    method: str
    tokens: int
    accept: float | None = None
    accept_source: str = ""
    draft_name: str | None = None
    draft_sha256: str | None = None
    draft_source: str | None = None

    def __post_init__(self):
        if self.method not in SPEC_METHODS:
            raise InvalidSpec(ARGUMENT, "spec_method", f"must be one of {', '.join(SPEC_METHODS)}")
        if not isinstance(self.tokens, int) or isinstance(self.tokens, bool) or not 1 <= self.tokens <= 64:
            raise InvalidSpec(ARGUMENT, "spec_tokens", "draft tokens per step: an integer from 1 to 64")
        if self.accept is not None and not 1.0 <= self.accept <= self.tokens + 1:
            raise InvalidSpec(ARGUMENT, "spec_accept", f"an acceptance length is between 1 and spec_tokens + 1 "
                                                       f"= {self.tokens + 1}")
        if (self.method == "mtp") != (self.draft_name is None):
            raise InvalidSpec(ARGUMENT, "draft_model", "mtp drafts with the model's own MTP layers; eagle3 and "
                                                       "draft_model need a draft model")

    def to_dict(self) -> dict:
        doc = {"method": self.method, "tokens": self.tokens, "accept": self.accept,
               "accept_source": self.accept_source}
        if self.draft_name is not None:
            doc["draft"] = {"name": self.draft_name, "sha256": self.draft_sha256, "source": self.draft_source}
        return doc

    @classmethod
    def from_dict(cls, doc: dict) -> Speculation:
        draft = doc.get("draft") or {}
        return cls(method=doc["method"], tokens=int(doc["tokens"]), accept=doc.get("accept"),
                   accept_source=doc.get("accept_source", ""), draft_name=draft.get("name"),
                   draft_sha256=draft.get("sha256"), draft_source=draft.get("source"))


def speculation_for(model: LayerGraph, tokens: int, *, method: str | None = None, draft: LayerGraph | None = None,
                    accept: float | None = None) -> Speculation:
    """The :class:`Speculation` of a plan of ``model`` (the target, before :func:`with_draft`):
    ``method`` defaults to ``draft_model`` with a draft, else ``mtp``; ``mtp`` needs the model's MTP
    layers placed (``load_model(..., mtp=True)``, ``--mtp``); ``accept`` defaults to
    :func:`default_accept` (None when no published row applies)."""
    method = method or ("draft_model" if draft is not None else "mtp")
    if method == "mtp":
        if draft is not None:
            raise InvalidSpec(ARGUMENT, "draft_model", "mtp drafts with the model's own MTP layers; a draft model "
                                                       "takes --spec-method eagle3 or draft_model")
        if not mtp_count(model):
            raise InvalidSpec(ARGUMENT, "spec_method", f"{model.name} places no MTP layers (load it with --mtp, "
                                                       "when its checkpoint ships them) or give --draft-model")
    elif draft is None:
        raise InvalidSpec(ARGUMENT, "draft_model", f"{method} drafts with a separate model: give --draft-model")
    source = "given"
    if accept is None:
        found = default_accept(model, method, tokens)
        if found is not None:
            value, row, at = found
            accept = min(value, tokens + 1.0)
            source = f"{row.source} ({row.status}; {row.family}, {method}, measured at k = {at}: {row.setting})"
        else:
            source = "none published for this model and method: give --spec-accept"
    return Speculation(method, tokens, accept, source,
                       draft_name=None if draft is None else draft.name,
                       draft_sha256=None if draft is None else draft.sha256,
                       draft_source=None if draft is None else draft.source)
