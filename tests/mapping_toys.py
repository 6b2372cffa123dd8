"""Small explicit specs with hand-computable bytes, shared by the mapping, validate and export tests.

Model ``toy-hybrid``: embedding (10 x 8 params = 160 B at 16 bits), six decoder layers alternating
linear attention (1000 B weights, 50 B state per request) and attention (1000 B weights, 2 B KV per
token = 200 B per request at 100 tokens), LM head (10 x 8 + 8 params = 176 B). Workload: context 100,
concurrency 2. Activations: 8 elements x 16 bits = 16 B per token, buffers 2 x 16 = 32 B per device.

Fleet ``toy-fleet``: 2 racks x 3 devices of ``memory`` bytes; 2 us inside a rack; racks joined only
through slot 0 (``line``), 3 us, so r0w1-r1w1 has no direct link (shortest path 2 + 3 + 2 = 7 us).
"""

from __future__ import annotations

from placer import load_fleet, load_model, make_instance, workload_for
from placer.problem.placement import Status, evaluate

TOY_MODEL = """\
name: toy-hybrid
hidden_size: 8
vocab_size: 10
layers:
  - {kind: linear_attention, weight_bytes: 1000, state_bytes_per_request: 50}
  - {kind: attention, weight_bytes: 1000, kv_bytes_per_token: 2}
  - {kind: linear_attention, weight_bytes: 1000, state_bytes_per_request: 50}
  - {kind: attention, weight_bytes: 1000, kv_bytes_per_token: 2}
  - {kind: linear_attention, weight_bytes: 1000, state_bytes_per_request: 50}
  - {kind: attention, weight_bytes: 1000, kv_bytes_per_token: 2}
default_workload: {context: 100, concurrency: 2, weight_bits: 16, kv_bits: 16, activation_bits: 16}
"""


def toy_hybrid_spec(name: str = "toy-ffn", repeats: int = 2, mamba: str = "{type: mamba, d_state: 4}") -> str:
    """A pattern spec of ``repeats`` x (Mamba-style mixer ``mamba`` with a 4-expert MoE, GQA
    attention with a dense FFN): hidden 16, vocabulary 32, context 64, one live request."""
    return (f"name: {name}\nhidden_size: 16\nvocab_size: 32\nnum_layers: {2 * repeats}\n"
            f'pattern: "(MA)*{repeats}"\n'
            f"mixers:\n  mam: {mamba}\n  att: {{type: gqa, num_heads: 2, num_kv_heads: 1}}\n"
            "ffns:\n  mlp: {type: dense, intermediate_size: 32}\n"
            "  moe: {type: moe, num_experts: 4, experts_per_token: 2, moe_intermediate_size: 8}\n"
            "layer_types:\n  M: {mixer: mam, ffn: moe}\n  A: {mixer: att, ffn: mlp}\n"
            "default_workload: {context: 64, concurrency: 1}\n")


def toy_fleet_yaml(memory: int = 3000, unavailable=("r1w2",)) -> str:
    return (f"name: toy-fleet\n"
            f"device: {{kind: wafer, memory: {memory}}}\n"
            f"fleet: {{racks: 2, per_rack: 3, intra_rack_latency_us: 2, inter_rack_latency_us: 3,\n"
            f"        inter_rack_topology: line, unavailable: [{', '.join(unavailable)}]}}\n")


def toy_specs(folder, memory: int = 3000, unavailable=("r1w2",)):
    """Write the toy model and fleet into ``folder``; returns (model path, hardware path)."""
    m = folder / "toy.yaml"
    h = folder / "toy-fleet.yaml"
    m.write_text(TOY_MODEL, encoding="utf-8")
    h.write_text(toy_fleet_yaml(memory, unavailable), encoding="utf-8")
    return m, h


def toy_instance(folder, mode: str = "contiguous", granularity: str = "layer", memory: int = 3000,
                 pins=(), concurrency: int | None = None, unavailable=("r1w2",)):
    m_path, h_path = toy_specs(folder, memory, unavailable)
    model = load_model(m_path)
    fleet = load_fleet(h_path)
    wl = workload_for(model, concurrency=concurrency)
    return make_instance(model, fleet, wl, mode=mode, granularity=granularity, pins=pins)


def by_hand(instance, assignment, method: str = "by-hand"):
    """A :class:`Result` for a hand-made ``assignment`` (device indices: r0w0 r0w1 r0w2 r1w0 r1w1)."""
    return evaluate(instance, assignment, method=method, status=Status.HEURISTIC)


def spec_mapping(folder, spec, assignment=None, *, stages=None, memory: int = 10**9, context: int | None = None
                 ) -> dict:
    """The mapping of a hand-made placement of ``spec`` (YAML text, written to ``folder``, or the
    path of a spec or a ``config.json``) on one rack of four ``memory``-byte wafers, at the spec's
    default workload (``context`` tokens if given): ``assignment`` (device per node), or ``stages``
    (decoder layers per stage; the embedding on the first stage, the head on the last)."""
    from pathlib import Path

    from placer.mapping import build_mapping

    if isinstance(spec, str):
        (folder / "spec.yaml").write_text(spec, encoding="utf-8")
        spec = folder / "spec.yaml"
    (folder / "hw.yaml").write_text(f"name: big\ndevice: {{kind: wafer, memory: {memory}}}\n"
                                    "fleet: {racks: 1, per_rack: 4}\n", encoding="utf-8")
    model = load_model(Path(spec))
    inst = make_instance(model, load_fleet(folder / "hw.yaml"), workload_for(model, context=context))
    if stages is not None:
        owner = {i: k for k, layers in enumerate(stages) for i in layers}
        assignment = [owner[x.index] if x.index is not None else (0 if x.kind == "embedding" else len(stages) - 1)
                      for x in inst.nodes]
    return build_mapping(inst, by_hand(inst, assignment))


def kimi_mapping(mode: str, method: str) -> dict:
    """The committed kimi-k3 / wse-3t mapping of ``mode``, or, when it is absent, one placed by ``method``."""
    from placer.algorithms import place
    from placer.mapping import build_mapping, read_mapping
    from placer.specs.catalog import project_root

    path = project_root() / "solutions" / f"kimi-k3__wse-3t__{mode}.json"
    if path.exists():
        return read_mapping(path)
    model, fleet = load_model("kimi-k3"), load_fleet("wse-3t")
    inst = make_instance(model, fleet, workload_for(model), mode=mode)
    return build_mapping(inst, place(inst, method=method))
