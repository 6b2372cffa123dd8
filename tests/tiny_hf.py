"""Tiny Hugging Face configs of every family placer imports (random weights, width 32, 4 layers).

Each is a ``config.json`` with the keys the published checkpoints use, so placer's importer and
transformers read the same file. Layer kinds follow the family: dense GQA (Llama), MoE (Qwen3-MoE,
DeepSeek-V3 with MLA, gpt-oss with sliding windows), hybrids of linear and full attention (Jamba
Mamba-1, Kimi-Linear KDA + MLA, MiniMax lightning, Qwen3-Next Gated DeltaNet).
"""

from __future__ import annotations

import json
from pathlib import Path

VOCAB = 97
_COMMON = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
               max_position_embeddings=64, pad_token_id=0, tie_word_embeddings=False)

FAMILIES: dict[str, dict] = {
    "llama": dict(architectures=["LlamaForCausalLM"], model_type="llama", intermediate_size=64,
                  num_key_value_heads=2),
    "qwen3_moe": dict(architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe", intermediate_size=64,
                      moe_intermediate_size=16, num_key_value_heads=2, head_dim=8, num_experts=4,
                      num_experts_per_tok=2, decoder_sparse_step=1, mlp_only_layers=[]),
    "deepseek_v3": dict(architectures=["DeepseekV3ForCausalLM"], model_type="deepseek_v3", intermediate_size=64,
                        moe_intermediate_size=16, num_key_value_heads=4, n_routed_experts=4, num_experts_per_tok=2,
                        n_shared_experts=1, first_k_dense_replace=1, q_lora_rank=16, kv_lora_rank=16,
                        qk_rope_head_dim=4, qk_nope_head_dim=8, v_head_dim=8, n_group=1, topk_group=1),
    "gpt_oss": dict(architectures=["GptOssForCausalLM"], model_type="gpt_oss", intermediate_size=32,
                    num_key_value_heads=2, head_dim=8, num_local_experts=4, num_experts_per_tok=2, sliding_window=4,
                    layer_types=["sliding_attention", "full_attention"] * 2),
    "jamba": dict(architectures=["JambaForCausalLM"], model_type="jamba", intermediate_size=64, num_key_value_heads=2,
                  num_experts=4, num_experts_per_tok=2, attn_layer_period=4, attn_layer_offset=2,
                  expert_layer_period=2, expert_layer_offset=1, mamba_d_state=4, mamba_d_conv=4, mamba_expand=2,
                  mamba_dt_rank=4, use_mamba_kernels=False),
    "kimi_linear": dict(architectures=["KimiLinearForCausalLM"], model_type="kimi_linear", intermediate_size=64,
                        moe_intermediate_size=16, num_key_value_heads=4, num_experts=4, num_experts_per_token=2,
                        num_shared_experts=1, first_k_dense_replace=1, kv_lora_rank=16, qk_rope_head_dim=4,
                        qk_nope_head_dim=8, v_head_dim=8,
                        linear_attn_config={"kda_layers": [1, 2, 4], "full_attn_layers": [3], "num_heads": 2,
                                            "head_dim": 8, "short_conv_kernel_size": 4}),
    "minimax": dict(architectures=["MiniMaxForCausalLM"], model_type="minimax", intermediate_size=32,
                    num_key_value_heads=2, head_dim=8, num_local_experts=4, num_experts_per_tok=2,
                    layer_types=["linear_attention", "full_attention"] * 2),
    "qwen3_next": dict(architectures=["Qwen3NextForCausalLM"], model_type="qwen3_next", intermediate_size=64,
                       moe_intermediate_size=16, shared_expert_intermediate_size=16, num_key_value_heads=2,
                       head_dim=8, num_experts=4, num_experts_per_tok=2, decoder_sparse_step=1, mlp_only_layers=[],
                       linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8,
                       linear_value_head_dim=8,
                       layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"]),
}


def write_config(folder: Path, family: str) -> Path:
    """``folder/config.json`` of ``family``; returns ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({**_COMMON, **FAMILIES[family]}, indent=1), encoding="utf-8")
    return folder


def build(folder: Path, seed: int = 0):
    """The transformers model of ``folder/config.json`` with seeded random weights, in eval mode (float32)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(seed)
    config = AutoConfig.from_pretrained(folder)
    return AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
