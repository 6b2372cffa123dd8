"""The corpus of real Hugging Face config.json files (tests/fixtures/hf_corpus, see its SOURCES.md)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

CORPUS = Path(__file__).parent / "fixtures" / "hf_corpus"
CONFIGS = sorted(p for p in CORPUS.glob("*.json")
                 if p.name != "meta_counts.json" and not p.name.endswith(".hf_quant_config.json"))


def test_corpus_is_large_and_every_file_is_the_recorded_copy():
    listed = dict(re.findall(r"^\| `([^`]+)` \|.*\| `([0-9a-f]{16})` \|$",
                             (CORPUS / "SOURCES.md").read_text(), flags=re.M))
    files = {p.name for p in CORPUS.glob("*.json") if p.name != "meta_counts.json"}
    assert set(listed) == files
    for name, digest in listed.items():
        assert hashlib.sha256((CORPUS / name).read_bytes()).hexdigest()[:16] == digest, name
    assert len(CONFIGS) >= 40
