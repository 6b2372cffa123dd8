
# Vendored for placer's conformance tests from the sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl wheel: the
# speculative-decoding algorithm names, the aliases it reserves, the rule that names a field's flag
# and the fields of the spec namespace (each flag is --field-name). Regenerate: tests/vendored/extract.py

from enum import Enum, auto


# sglang/srt/speculative/spec_info.py (RECORD sha256=EdJbco6hiu_4K8JpxlpmCLXJY4sKt1TyhLLfdr6teRA): members of lines 32-374
class SpeculativeAlgorithm(Enum):
    DFLASH = auto()
    UNO = auto()
    DSPARK = auto()
    EAGLE = auto()
    EAGLE3 = auto()
    FROZEN_KV_MTP = auto()
    STANDALONE = auto()
    NGRAM = auto()
    NONE = auto()


# sglang/srt/speculative/spec_registry.py (RECORD sha256=wIDtc2KKA554DILDNgD9SVUm1P1PzaAOIfqlNphhq98): lines 183-183 verbatim
_RESERVED_ALIASES = frozenset({"NEXTN"})


# sglang/srt/arg_groups/arg_utils.py (RECORD sha256=KltONt-1_88v6dyerXFvLnlR48VljmMz4vaNLeTfRAA): lines 288-290 verbatim
def _field_to_cli_name(name: str) -> str:
    """Convert a field name like ``model_path`` to ``--model-path``."""
    return "--" + name.replace("_", "-")


# sglang/srt/arg_groups/fields/spec.py (RECORD sha256=P_EYdDTZ_vatbSkNkMAr4g2YmfhR7tXYefZcS1uNpfs): field names of class Spec, lines 24-283
SPEC_FIELDS = ('speculative_algorithm', 'uno_lora_path', 'speculative_draft_model_path', 'speculative_boundary_reduction', 'speculative_draft_model_revision', 'speculative_draft_load_format', 'speculative_num_steps', 'speculative_eagle_topk', 'speculative_num_draft_tokens', 'speculative_dflash_block_size', 'speculative_domino_candidate_pool_size', 'speculative_dspark_block_size', 'speculative_dspark_sps_table_path', 'speculative_dspark_confidence_sts_path', 'speculative_dspark_align_verify_tokens_to_graph_tier', 'speculative_accept_threshold_single', 'speculative_accept_threshold_acc', 'speculative_use_rejection_sampling', 'speculative_use_block_verification', 'speculative_token_map', 'speculative_attention_mode', 'speculative_draft_attention_backend', 'speculative_dsa_topk_backend', 'speculative_draft_kv_cache_dtype', 'speculative_draft_window_size', 'speculative_draft_sink_size', 'speculative_moe_runner_backend', 'speculative_moe_a2a_backend', 'speculative_enable_w4a4_mxfp4_megamoe', 'speculative_draft_model_quantization', '_speculative_draft_quantization_explicitly_set', 'enable_multi_layer_eagle', 'speculative_adaptive', 'speculative_adaptive_config', 'spec_trace_dir', 'speculative_ngram_min_bfs_breadth', 'speculative_ngram_max_bfs_breadth', 'speculative_ngram_match_type', 'speculative_ngram_max_trie_depth', 'speculative_ngram_capacity', 'speculative_ngram_external_corpus_path', 'speculative_ngram_external_sam_budget', 'speculative_ngram_external_corpus_max_tokens')
