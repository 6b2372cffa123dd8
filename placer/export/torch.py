"""``torch.distributed.pipelining``: a runnable script that pipelines the Hugging Face model as mapped.

``pipeline(module, mb_args, split_spec={"inner.model.layers.23": SplitPoint.BEGINNING, ...})``
traces the module and cuts it before each named submodule. A raw Hugging Face causal LM does not
trace (its output holds a ``DynamicCache``; with ``use_cache=False`` tracing recurses), so the
script wraps it in a module that returns the logits only; that prefixes every module name with
``inner.`` (``inner.model.embed_tokens``, ``inner.model.layers.N``, ``inner.model.norm``,
``inner.lm_head``). The embedding rides on the first stage and the norm and head on the last; a
stage holding only the head begins at ``inner.lm_head``.

``--bare`` prints the split points as JSON: ``split_spec`` (module name -> ``"BEGINNING"``), the
stage count and each stage's decoder range.
"""

from __future__ import annotations

from placer.export.command import header, served_model, target_version
from placer.export.stages import Export, ExportOptions, ExportRefused, runtime_stages
from placer.mapping import compact_json
from placer.mapping.view import MappingView
from placer.specs.model import LayerGraph

__all__ = ["WRAPPER_PREFIX", "module_order", "split_points", "parse_split_spec", "export_torch", "script"]

WRAPPER_PREFIX = "inner."


def module_order(num_hidden_layers: int, prefix: str = WRAPPER_PREFIX) -> list[str]:
    """Top-level pipeline modules in execution order."""
    return [f"{prefix}model.embed_tokens", *(f"{prefix}model.layers.{i}" for i in range(num_hidden_layers)),
            f"{prefix}model.norm", f"{prefix}lm_head"]


def split_points(ranks, prefix: str = WRAPPER_PREFIX) -> dict[str, str]:
    spec = {}
    for r in ranks[1:]:
        if r.count:
            spec[f"{prefix}model.layers.{r.decoder[0]}"] = "BEGINNING"
        elif r.head:
            spec[f"{prefix}lm_head"] = "BEGINNING"
        else:
            raise ValueError(f"stage {r.index} holds neither a decoder layer nor the head")
    return spec


def parse_split_spec(spec: dict[str, str], num_hidden_layers: int, prefix: str = WRAPPER_PREFIX) -> list[int]:
    """Decoder layers per stage that ``pipeline(split_spec=spec)`` builds; ``ValueError`` on a bad spec."""
    order = module_order(num_hidden_layers, prefix)
    position = {name: i for i, name in enumerate(order)}
    cuts = []
    for name, point in spec.items():
        if name not in position:
            raise ValueError(f"no submodule {name!r}")
        if point != "BEGINNING":
            raise ValueError(f"{name}: expected SplitPoint.BEGINNING, got {point!r}")
        if position[name] == 0:
            raise ValueError(f"a split at the beginning of {name} leaves the first stage empty")
        cuts.append(position[name])
    if cuts != sorted(set(cuts)):
        raise ValueError("split points must be distinct and in module order")
    bounds = [0, *cuts, len(order)]
    layer = f"{prefix}model.layers."
    return [sum(1 for m in order[a:b] if m.startswith(layer)) for a, b in zip(bounds, bounds[1:])]


_SCRIPT = '''\
import argparse

import torch
import torch.distributed as dist
from torch.distributed.pipelining import ScheduleGPipe, SplitPoint, pipeline
from transformers import AutoModelForCausalLM

MODEL = {model!r}
NUM_STAGES = {stages}
SPLIT_SPEC = {{
{split_lines}
}}


class LogitsOnly(torch.nn.Module):
    """The causal LM returning logits only, so pipeline() can trace it (module names gain 'inner.')."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, input_ids):
        return self.inner(input_ids=input_ids, use_cache=False).logits


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=4, help="sequences per step")
    ap.add_argument("--microbatches", type=int, default=2)
    ap.add_argument("--seq", type=int, default=8, help="tokens per sequence")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--backend", default="gloo", help="gloo (CPU) or nccl (GPU)")
    ap.add_argument("--save-logits", default=None, help="the last stage saves the logits here (torch.save)")
    args = ap.parse_args()
    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    assert world == NUM_STAGES, f"run one process per stage: {{NUM_STAGES}}, not {{world}}"
    device = torch.device(f"cuda:{{rank % torch.cuda.device_count()}}") if args.backend == "nccl" \\
        else torch.device("cpu")
    model = LogitsOnly(AutoModelForCausalLM.from_pretrained(MODEL, dtype="auto")).eval()
    generator = torch.Generator().manual_seed(args.seed)
    vocab = model.inner.config.vocab_size
    ids = torch.randint(0, vocab, (args.batch, args.seq), generator=generator)
    example = ids[: args.batch // args.microbatches]
    pipe = pipeline(model, mb_args=(example,), split_spec=SPLIT_SPEC)
    stage = pipe.build_stage(rank, device)
    schedule = ScheduleGPipe(stage, n_microbatches=args.microbatches)
    with torch.no_grad():
        if rank == 0:
            schedule.step(ids.to(device))
        elif rank == world - 1:
            logits = schedule.step()
            print("next tokens:", logits[:, -1].argmax(-1).tolist())
            if args.save_logits:
                torch.save(logits.cpu(), args.save_logits)
        else:
            schedule.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
'''


def script(model: str, spec: dict[str, str], stages: int) -> str:
    """The runnable pipelining script for ``model`` cut at ``spec`` into ``stages`` stages."""
    split_lines = "\n".join(f"    {name!r}: SplitPoint.BEGINNING," for name in spec)
    return _SCRIPT.format(model=model, stages=stages, split_lines=split_lines)


def export_torch(view: MappingView, graph: LayerGraph, source: str = "<mapping>",
                 options: ExportOptions = ExportOptions()) -> Export:
    """A pipelining script (``torchrun --nproc-per-node S script.py``), or the split points as JSON (``bare``)."""
    version = target_version("torch", options)
    ranks = runtime_stages(view, graph, "torch.distributed.pipelining", source)
    grouped = [r for r in ranks if r.tensor_parallel > 1 or r.expert_parallel > 1]
    if grouped:
        r = grouped[0]
        raise ExportRefused(source, f"/stages/{r.index}",
                            f"the torch.distributed.pipelining script runs one process per stage with whole layers; "
                            f"stage {r.index} is a group of {r.tensor_parallel} devices (tensor parallelism inside "
                            "a stage needs a 2-D device mesh of one tensor-parallel size, which the script does not "
                            "build); solve with --tp 1 for this export")
    try:
        spec = split_points(ranks)
        counts = parse_split_spec(spec, graph.num_hidden_layers)
    except ValueError as exc:
        raise ExportRefused(source, "/stages", f"torch.distributed.pipelining cannot express this mapping: {exc}") \
            from None
    want = [r.count for r in ranks]
    if counts != want or len(counts) != len(ranks):
        raise ExportRefused(source, "/stages", f"split points read back as {counts}, expected {want}")
    if options.bare:
        out = {
            "num_stages": len(ranks),
            "split_spec": spec,
            "stages": [{"index": r.index, "device": r.device,
                        "layer_range": [r.decoder[0], r.decoder[-1] + 1] if r.count else None,
                        "embedding": r.index == 0, "head": r.index == len(ranks) - 1} for r in ranks],
        }
        return Export(text=compact_json(out))
    lines = header(view, "torch.distributed.pipelining", version, len(ranks), options)
    lines.append(f"# run: torchrun --nproc-per-node {len(ranks)} THIS_FILE.py  (one process per stage; "
                 "--backend nccl on GPUs)")
    model = served_model(view, options)
    return Export(text="\n".join(lines) + "\n" + script(model, spec, len(ranks)).rstrip("\n"))
