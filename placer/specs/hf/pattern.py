"""Readable layer patterns: a letter per decoder layer, compressed with repeats and groups."""

from __future__ import annotations

from collections import Counter

__all__ = ["compress_pattern"]


def _runs(seq: list[str]) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for x in seq:
        if out and out[-1][0] == x:
            out[-1] = (x, out[-1][1] + 1)
        else:
            out.append((x, 1))
    return out


def _letters(seq: list[str], min_run: int) -> list[str]:
    """Run-length tokens: runs of at least ``min_run`` as ``X*n``, shorter runs spelled out and joined."""
    tokens: list[str] = []
    plain = ""
    for x, n in _runs(seq):
        if n >= min_run:
            if plain:
                tokens.append(plain)
                plain = ""
            tokens.append(f"{x}*{n}")
        else:
            plain += x * n
    if plain:
        tokens.append(plain)
    return tokens


def _best_period(seq: list[str]) -> tuple[int, int, int] | None:
    """(period, start, repeats) of the most readable repeated block, or None.

    The period is the shift under which the sequence agrees with itself most often. Among the
    phases of that period, a block covering the whole sequence wins; otherwise one whose last
    letter is its rarest (so "3 linear, then 1 attention" reads as ``(KKKM)``), then the longest run.
    """
    n = len(seq)
    best_p, best_matches = 0, 0
    for p in range(2, min(64, n // 2) + 1):
        matches = sum(seq[i] == seq[i + p] for i in range(n - p))
        if matches > best_matches:
            best_p, best_matches = p, matches
    if not best_p:
        return None
    p = best_p
    candidates = []
    for phase in range(p):
        start = phase
        while start + 2 * p <= n:
            block = seq[start:start + p]
            reps = 1
            while start + (reps + 1) * p <= n and seq[start + reps * p:start + (reps + 1) * p] == block:
                reps += 1
            if reps >= 2:
                counts = Counter(block)
                rarest_last = counts[block[-1]] == min(counts.values()) and len(counts) > 1
                whole = start == 0 and reps * p == n
                candidates.append(((whole, rarest_last, reps, -start), (p, start, reps)))
            start += reps * p
    if not candidates:
        return None
    return max(candidates)[1]


def compress_pattern(seq: list[str]) -> str:
    """A readable pattern string that :func:`placer.specs.model.parse_pattern` expands back to ``seq``.

    >>> compress_pattern(list("DDD" + "E" * 58))
    'D*3 E*58'
    >>> compress_pattern(list("D" + "KKM" + "KKKM" * 5 + "KKM"))
    'DKKM (KKKM)*5 KKM'
    """
    if not seq:
        return ""
    if len(_runs(seq)) <= 8:
        return " ".join(_letters(seq, 3))
    found = _best_period(seq)
    if found is None:
        return " ".join(_letters(seq, 3))
    p, start, reps = found
    block = " ".join(_letters(seq[start:start + p], 4))
    parts = [compress_pattern(seq[:start]), f"({block})*{reps}", compress_pattern(seq[start + p * reps:])]
    return " ".join(x for x in parts if x)
