# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
# Vendored for placer's conformance tests from the vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl wheel, vllm/config/speculative.py
# (RECORD sha256=4aMuWFtnf2yJsNtoSMN2cz4YYOpeoygYDWOGIdN5I54): lines 38-84 verbatim (the method names), then the names of
# SpeculativeConfig's fields (what --speculative-config JSON may set), listed from the class.
# Regenerate: tests/vendored/extract.py

from typing import Literal

MTPModelTypes = Literal[
    "deepseek_mtp",
    "dots3_note_mtp",
    "mimo_mtp",
    "mimo_v2_mtp",
    "glm4_moe_mtp",
    "glm4_moe_lite_mtp",
    "glm_ocr_mtp",
    "ernie_mtp",
    "nemotron_h_mtp",
    "exaone_moe_mtp",
    "exaone4_5_mtp",
    "qwen3_next_mtp",
    "qwen4_exp_mtp",
    "qwen3_5_mtp",
    "longcat_flash_mtp",
    "bailing_hybrid_v3_mtp",
    "minimax_m3_mtp",
    "bailing_hybrid_mtp",
    "mtp",
    "kimi_k3_mtp",
    "pangu_ultra_moe_mtp",
    "step3p5_mtp",
    "step5_mtp",
    "hy_v3_mtp",
    "hy_v4_mtp",
    "gemma4_mtp",
    "inkling_mtp",
    "glm5_next_mtp",
]
NgramGPUTypes = Literal["ngram_gpu"]
DFlashModelTypes = Literal["dflash"]
DSparkModelTypes = Literal["dspark"]
EagleModelTypes = Literal[
    "eagle", "eagle3", "extract_hidden_states", MTPModelTypes, DFlashModelTypes
]
SpeculativeMethod = Literal[
    "ngram",
    "draft_model",
    "suffix",
    "custom_class",
    EagleModelTypes,
    NgramGPUTypes,
    DSparkModelTypes,
]
RejectionSampleMethod = Literal["standard", "synthetic", "block", "fly"]
DraftSampleMethod = Literal["greedy", "probabilistic"]

SPECULATIVE_CONFIG_FIELDS = ('enforce_eager', 'num_speculative_tokens', 'model', 'method', 'draft_tensor_parallel_size', 'tensor_parallel_size', 'quantization', 'moe_backend', 'attention_backend', 'kv_cache_dtype', 'max_model_len', 'revision', 'code_revision', 'index_share_for_mtp_iteration', 'disable_padded_drafter_batch', 'disable_eagle_block_drop', 'disable_lookahead_block_hashes', 'draft_lm_head_quantization', 'use_local_argmax_reduction', 'use_heterogeneous_vocab', 'prompt_lookup_max', 'prompt_lookup_min', 'parallel_drafting', 'target_model_config', 'target_parallel_config', 'num_speculative_tokens_per_batch_size', 'draft_model_config', 'draft_parallel_config', 'suffix_decoding_max_tree_depth', 'suffix_decoding_max_cached_requests', 'suffix_decoding_max_spec_factor', 'suffix_decoding_min_token_prob', 'draft_load_config', 'rejection_sample_method', 'synthetic_acceptance_rates', 'synthetic_acceptance_length', 'enable_adaptive_verification', 'draft_sample_method', 'dspark_draft_topk', 'xpress_topc', 'fly_window_size', 'fly_entropy_threshold', 'fly_entropy_top_k')
