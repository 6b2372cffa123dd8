"""Run a contiguous mapping on real PyTorch modules of the model's own family (``placer run --backend torch``).

The model's architecture picks a transformers class (:data:`FAMILIES`); a tiny config of it (width
32, a few heads and experts) gets the mapping's decoder-layer count, the kind of every layer (full or
linear attention, dense or MoE FFN) and seeded random weights. Each pipeline stage is one process
(gloo): it builds the whole tiny model from the seed, keeps a model of the same family holding only
its layers (renumbered from 0, so its cache and masks are its own; the embedding on the first stage,
the final norm and head on the last), and runs them with the family's own cache for every
micro-batch of requests it has seen. Requests share one prompt length; the driver (stage 0) feeds
each micro-batch's prompt, then its greedy tokens as they come back from the last stage, with every
micro-batch in flight at once. The unsplit model, run on the same micro-batches, is the oracle:
every request's tokens must be equal.

Each stage reports the bytes of its cache tensors at the end beside placer's accounting of the
same tiny model (:mod:`placer.problem.memory` on the tiny config read by placer's importer), for the
tokens each request cached.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from placer.specs.errors import ARGUMENT, InvalidSpec

if TYPE_CHECKING:
    from placer.executor.run import RunOptions
    from placer.mapping.view import MappingView

__all__ = ["FAMILIES", "tiny_hf_config", "run_torch_mapping", "stage_ranges"]

HIDDEN = 32
VOCAB = 97
_COMMON = dict(vocab_size=VOCAB, hidden_size=HIDDEN, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
               max_position_embeddings=4096, pad_token_id=0, tie_word_embeddings=False)


def _layer_kinds(graph) -> list[tuple[str, str | None]]:
    return [(x.kind, x.ffn) for x in graph.layers if x.index is not None and x.part is None]


def _llama(kinds):
    if any(k != "attention" or f == "moe" for k, f in kinds):
        return None
    return dict(architectures=["LlamaForCausalLM"], model_type="llama", intermediate_size=64)


def _qwen3_moe(kinds):
    if any(k != "attention" for k, _ in kinds):
        return None
    return dict(architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe", intermediate_size=64,
                moe_intermediate_size=16, num_experts=4, num_experts_per_tok=2, decoder_sparse_step=1,
                mlp_only_layers=[i for i, (_, f) in enumerate(kinds) if f != "moe"])


def _qwen3_next(kinds):
    return dict(architectures=["Qwen3NextForCausalLM"], model_type="qwen3_next", intermediate_size=64,
                moe_intermediate_size=16, shared_expert_intermediate_size=16, num_experts=4, num_experts_per_tok=2,
                decoder_sparse_step=1, mlp_only_layers=[i for i, (_, f) in enumerate(kinds) if f != "moe"],
                linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=8,
                layer_types=["full_attention" if k == "attention" else "linear_attention" for k, _ in kinds])


def _minimax(kinds):
    if any(f != "moe" for _, f in kinds):
        return None
    return dict(architectures=["MiniMaxForCausalLM"], model_type="minimax", intermediate_size=32,
                num_local_experts=4, num_experts_per_tok=2,
                layer_types=["full_attention" if k == "attention" else "linear_attention" for k, _ in kinds])


# architecture class -> tiny config builder (None when the mapping's layer kinds do not fit the family)
FAMILIES = {
    "LlamaForCausalLM": _llama,
    "Qwen3MoeForCausalLM": _qwen3_moe,
    "Qwen3NextForCausalLM": _qwen3_next,
    "MiniMaxForCausalLM": _minimax,
    "MiniMaxText01ForCausalLM": _minimax,
}


def tiny_hf_config(graph) -> dict:
    """The tiny ``config.json`` (a dict) of ``graph``'s family with its layer count and layer kinds."""
    build = FAMILIES.get(graph.architecture)
    if build is None:
        raise InvalidSpec(ARGUMENT, "backend",
                          f"the torch backend runs {', '.join(sorted(FAMILIES))}; {graph.name} is "
                          f"{graph.architecture or 'of no named architecture'} (use the default numpy twin)")
    kinds = _layer_kinds(graph)
    extra = build(kinds)
    if extra is None:
        raise InvalidSpec(ARGUMENT, "backend", f"{graph.name}'s layer kinds do not fit {graph.architecture}")
    return {**_COMMON, **extra, "num_hidden_layers": len(kinds)}


def _slice_config(config: dict, start: int, stop: int) -> dict:
    out = dict(config, num_hidden_layers=stop - start)
    if "layer_types" in config:
        out["layer_types"] = config["layer_types"][start:stop]
    if "mlp_only_layers" in config:
        out["mlp_only_layers"] = [i - start for i in config["mlp_only_layers"] if start <= i < stop]
    return out


def stage_ranges(view: MappingView) -> list[tuple[int, int]]:
    """Decoder layers ``[start, stop)`` per stage of a contiguous mapping."""
    out = []
    for st in view.stages:
        idx = [int(n.split(".")[1]) for n in st.layers if n.startswith("layers.")]
        if not idx or idx != list(range(idx[0], idx[-1] + 1)):
            raise InvalidSpec("<mapping>", f"/stages/{st.index}",
                              "the torch backend runs contiguous stages of whole decoder layers")
        out.append((idx[0], idx[-1] + 1))
    if [a for a, _ in out[1:]] != [b for _, b in out[:-1]] or out[0][0] != 0:
        raise InvalidSpec("<mapping>", "/stages", "the torch backend runs contiguous stages in layer order")
    return out


# ----------------------------------------------------------------------------- one stage
def _build_full(config: dict, seed: int):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(seed)
    cfg = AutoConfig.for_model(**config)
    return AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).eval()


def _build_stage(config: dict, seed: int, start: int, stop: int, last: bool):
    """A model of the family holding layers ``start..stop-1`` of the seeded full model, renumbered."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    full = _build_full(config, seed)
    stage = AutoModelForCausalLM.from_config(AutoConfig.for_model(**_slice_config(config, start, stop)),
                                             dtype=torch.float32).eval()
    state = {}
    for key, value in full.state_dict().items():
        if key.startswith("model.layers."):
            i = int(key.split(".")[2])
            if start <= i < stop:
                state[f"model.layers.{i - start}.{key.split('.', 3)[3]}"] = value
        else:
            state[key] = value
    stage.load_state_dict(state, strict=True)
    if not last:
        stage.model.norm = torch.nn.Identity()
    return stage


def _cache_bytes(obj, seen=None) -> int:
    """Bytes of every tensor reachable from a transformers cache object."""
    import torch

    seen = set() if seen is None else seen
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    if torch.is_tensor(obj):
        return obj.nbytes
    if isinstance(obj, list | tuple):
        return sum(_cache_bytes(x, seen) for x in obj)
    if isinstance(obj, dict):
        return sum(_cache_bytes(x, seen) for x in obj.values())
    if hasattr(obj, "__dict__"):
        return sum(_cache_bytes(x, seen) for x in vars(obj).values())
    return 0


class _StageRunner:
    def __init__(self, config: dict, seed: int, start: int, stop: int, first: bool, last: bool):
        self.model = _build_stage(config, seed, start, stop, last)
        types = _slice_config(config, start, stop).get("layer_types")
        # a stage of linear-attention layers only: the family's causal-mask helper asks the cache for
        # a sequence length only attention layers keep (the transformers twin of vllm-project/vllm#51752);
        # such a stage needs no causal mask, so none is built
        self.no_mask = types is not None and "full_attention" not in types
        self.first, self.last = first, last
        self.caches: dict[int, object] = {}

    def step(self, mb: int, x, position: int):
        import torch

        length = x.shape[1]
        positions = torch.arange(position, position + length)[None].expand(x.shape[0], length)
        kw = dict(input_ids=x) if self.first else dict(inputs_embeds=x)
        if self.no_mask:
            kw["attention_mask"] = {"full_attention": None, "linear_attention": None}
        with torch.no_grad():
            module = self.model if self.last else self.model.model
            out = module(**kw, cache=self.caches.get(mb), use_cache=True, position_ids=positions)
        self.caches[mb] = out.cache if getattr(out, "cache", None) is not None else out.past_key_values
        return out.logits[:, -1].argmax(-1) if self.last else out.last_hidden_state

    def cache_bytes(self) -> int:
        return sum(_cache_bytes(c) for c in self.caches.values())


# ----------------------------------------------------------------------------- the pipeline
@dataclass(frozen=True)
class _Job:
    config: dict
    seed: int
    ranges: list
    prompts: list          # per micro-batch: list of prompt token lists
    new_tokens: int
    port: int
    out: str


def _worker(rank: int, job: _Job) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    world = len(job.ranges)
    if world > 1:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{job.port}", rank=rank, world_size=world)
    start, stop = job.ranges[rank]
    runner = _StageRunner(job.config, job.seed, start, stop, rank == 0, rank == world - 1)
    prompt_len = len(job.prompts[0][0])
    tokens = {m: [] for m in range(len(job.prompts))}
    pending = []
    t0 = time.perf_counter()
    for t in range(job.new_tokens):
        for m, batch in enumerate(job.prompts):
            b = len(batch)
            length = prompt_len if t == 0 else 1
            position = 0 if t == 0 else prompt_len + t - 1
            if rank == 0:
                if t == 0:
                    x = torch.tensor(batch, dtype=torch.long)
                elif world == 1:
                    x = tokens[m][-1][:, None]
                else:
                    x = torch.empty(b, 1, dtype=torch.long)
                    dist.recv(x, src=world - 1)
            else:
                x = torch.empty(b, length, HIDDEN, dtype=torch.float32)
                dist.recv(x, src=rank - 1)
            y = runner.step(m, x, position)
            if rank == world - 1:
                tokens[m].append(y.clone())
                if world > 1 and t + 1 < job.new_tokens:
                    y = y.clone()[:, None].contiguous()
                    pending.append((dist.isend(y, dst=0), y))
            else:
                y = y.contiguous()
                pending.append((dist.isend(y, dst=rank + 1), y))
    for handle, _ in pending:
        handle.wait()
    seconds = time.perf_counter() - t0
    report = dict(rank=rank, start=start, stop=stop, cache_bytes=runner.cache_bytes(), seconds=seconds)
    if rank == world - 1:
        report["tokens"] = {m: torch.stack(v, 1).tolist() for m, v in tokens.items()}
    Path(job.out, f"stage{rank}.json").write_text(json.dumps(report), encoding="utf-8")
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _reference(config: dict, seed: int, prompts: list, new_tokens: int) -> dict[int, list]:
    """Greedy tokens of the unsplit model, one micro-batch at a time with its own cache."""
    import torch

    model = _build_full(config, seed)
    out = {}
    with torch.no_grad():
        for m, batch in enumerate(prompts):
            x = torch.tensor(batch, dtype=torch.long)
            cache, got = None, []
            for t in range(new_tokens):
                position = 0 if t == 0 else len(batch[0]) + t - 1
                positions = torch.arange(position, position + x.shape[1])[None].expand(x.shape[0], x.shape[1])
                o = model(input_ids=x, cache=cache, use_cache=True, position_ids=positions)
                cache = o.cache if getattr(o, "cache", None) is not None else o.past_key_values
                tok = o.logits[:, -1].argmax(-1)
                got.append(tok)
                x = tok[:, None]
            out[m] = torch.stack(got, 1).tolist()
    return out


def _accounting(config: dict, ranges, requests: int, cached_tokens: int) -> list[int]:
    """Per stage: placer's KV + state bytes for ``requests`` requests of ``cached_tokens`` tokens,
    from the tiny config read by placer's own importer, at 32-bit caches."""
    from placer.problem import memory
    from placer.specs.model import load_model
    from placer.specs.workload import Workload

    with tempfile.TemporaryDirectory() as d:
        Path(d, "config.json").write_text(json.dumps(config), encoding="utf-8")
        graph = load_model(Path(d, "config.json"))
    wl = Workload(context_tokens=cached_tokens, kv_bits=32, state_bits=32, conv_state_bits=32)
    by_index = {x.index: x for x in graph.layers if x.index is not None}
    return [requests * sum(memory.request_bytes(by_index[i], wl) for i in range(a, b)) for a, b in ranges]


def run_torch_mapping(view: MappingView, options: RunOptions, *, model=None, hardware=None,
                      prompt_tokens: int = 6) -> dict:
    """Execute ``view`` on tiny transformers modules of its family, one gloo process per stage
    (``options``: its requests, tokens, micro-batch, seed and whether to check)."""
    import torch.multiprocessing as mp

    from placer.mapping import specs_from_mapping

    if view.mode == "free":
        raise InvalidSpec("<mapping>", "/mode", "the torch backend runs contiguous mappings (stages of whole layers)")
    graph, _fleet, _wl = specs_from_mapping(view.doc, model=model, hardware=hardware)
    config = tiny_hf_config(graph)
    ranges = stage_ranges(view)
    requests, tokens, seed = options.requests, options.tokens, options.seed
    mb = options.micro_batch or max(1, -(-requests // max(len(ranges), 1)))
    import random

    rng = random.Random(seed)
    prompts_all = [[rng.randrange(1, VOCAB) for _ in range(prompt_tokens)] for _ in range(requests)]
    prompts = [prompts_all[i:i + mb] for i in range(0, requests, mb)]
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        job = _Job(config=config, seed=seed, ranges=ranges, prompts=prompts, new_tokens=tokens, port=_free_port(),
                   out=out)
        if len(ranges) == 1:
            _worker(0, job)
        else:
            os.environ.setdefault("OMP_NUM_THREADS", "1")
            mp.start_processes(_worker, args=(job,), nprocs=len(ranges), join=True, start_method="spawn")
        reports = [json.loads(Path(out, f"stage{r}.json").read_text()) for r in range(len(ranges))]
    seconds = time.perf_counter() - t0
    got = {int(m): v for m, v in reports[-1]["tokens"].items()}
    expected = _accounting(config, ranges, requests, prompt_tokens + tokens - 1)
    stages = [dict(index=r["rank"], device=view.stages[r["rank"]].device, layers=[r["start"], r["stop"]],
                   cache_bytes=r["cache_bytes"], placer_bytes=expected[r["rank"]]) for r in reports]
    rep = dict(model=graph.name, family=graph.architecture, backend="torch", requests=requests, micro_batch=mb,
               micro_batches=len(prompts), tokens_per_request=tokens, prompt_tokens=prompt_tokens,
               tiny=dict(hidden=HIDDEN, vocab=VOCAB, layers=config["num_hidden_layers"], seed=seed),
               processes=len(ranges), seconds=round(seconds, 3), stages=stages,
               outputs={str(i): row for m in sorted(got) for i, row in
                        zip(range(m * mb, m * mb + len(got[m])), got[m])})
    if options.check:
        ref = _reference(config, seed, prompts, tokens)
        mismatched = [m * mb + j for m in ref for j, (a, b) in enumerate(zip(ref[m], got[m])) if a != b]
        rep["check"] = dict(tokens_match=not mismatched, mismatched_requests=mismatched)
    return rep
