"""Keep every result in README.md and docs/*.md what the tool prints.

A result appears in a page only inside a generated block::

    <!-- placer-docs: placer compare kimi-k3 -H wse-3t --threads 1 -q -->
    ```text
    (the command's standard output, verbatim)
    ```
    <!-- /placer-docs -->

The command runs in bash from the repository root, with ``placer`` and ``python`` meaning this
checkout's CLI and this interpreter, so a page shows a command exactly as a user types it (pipes
such as ``| tail -n 6`` included). ``<!-- placer-docs: python (the code above) -->`` runs the
```python fence just above the marker instead and shows what it prints. ``placer-docs[slow]``
marks a block the tests run only without ``-m "not slow"``.

    python tools/docs.py            # rewrite every block from the tool (all pages, atomically)
    python tools/docs.py --check    # exit 1 naming each page and block that differs; 0 when all agree
    python tools/docs.py --check --fast   # the same without the blocks tagged slow
    python tools/docs.py --list     # the blocks, one line each

Wall-clock timings (``status optimal (proven), 592.5 ms``, a table's ``time`` column) are kept as
printed and left out of the comparison. ``--check`` also reads the prose: outside blocks, fenced
code and inline code, a number of two or more digits (or with a decimal point) must be one a
block of the same page shows or runs, so prose can quote a result but not state one of its own;
an input belongs in backticks (`--context 128k`, `44 GB`).
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON_ABOVE = "python (the code above)"
BLOCK = re.compile(
    r"<!-- placer-docs(?P<tags>\[[a-z,]+\])?: (?P<command>.+?) -->\n"
    r"(?P<body>.*?)"
    r"<!-- /placer-docs -->",
    re.S)
PYTHON_FENCE = re.compile(r"```python\n(?P<code>.*?)```", re.S)
TIMEOUT_S = 600


def pages(root: Path = ROOT) -> list[Path]:
    """README.md and every page under docs/, in a fixed order."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


@dataclass(frozen=True)
class Block:
    page: Path
    index: int              # 0-based, in page order
    command: str
    tags: tuple[str, ...]
    body: str               # the output the page shows (fence stripped)
    code: str | None        # the Python code a python block runs
    span: tuple[int, int]   # the whole block's characters in the page text

    @property
    def name(self) -> str:
        return f"{_relative(self.page)}#{self.index}"

    @property
    def slow(self) -> bool:
        return "slow" in self.tags


def _relative(page: Path) -> str:
    try:
        return str(page.relative_to(ROOT))
    except ValueError:
        return str(page)


def _fenced(body: str) -> str:
    """The text inside the block's ```text fence."""
    m = re.fullmatch(r"```text\n(.*?)```\n", body, re.S)
    if not m:
        raise ValueError("a placer-docs block must hold exactly one ```text fence")
    return m[1]


def blocks(page: Path, text: str | None = None) -> list[Block]:
    """The generated blocks of ``page`` (``text``: the page's text, read when not given)."""
    text = page.read_text(encoding="utf-8") if text is None else text
    found = []
    for i, m in enumerate(BLOCK.finditer(text)):
        code = None
        if m["command"] == PYTHON_ABOVE:
            fences = list(PYTHON_FENCE.finditer(text, 0, m.start()))
            fence = fences[-1] if fences else None
            if not fence or text[fence.end():m.start()].strip():
                raise ValueError(f"{_relative(page)}: block {i}: no ```python fence right above it")
            code = fence["code"]
        try:
            body = _fenced(m["body"])
        except ValueError as err:
            raise ValueError(f"{_relative(page)}: block {i}: {err}") from None
        tags = tuple(m["tags"][1:-1].split(",")) if m["tags"] else ()
        found.append(Block(page, i, m["command"], tags, body, code, m.span()))
    return found


def _shims(folder: Path) -> dict[str, str]:
    """An environment where ``placer`` and ``python`` are this checkout's CLI and interpreter, and
    temporary files (``mktemp``) go to ``folder``, removed after the command."""
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    for name, line in (("placer", f'exec "{sys.executable}" -m placer.cli "$@"'),
                       ("python", f'exec "{sys.executable}" "$@"')):
        shim = bin_dir / name
        shim.write_text(f"#!/bin/sh\n{line}\n")
        shim.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}", PYTHONPATH=str(ROOT),
               COLUMNS="100", TERM="dumb", NO_COLOR="1", PYTHONHASHSEED="0", TMPDIR=str(folder))
    return env


def run(block: Block) -> str:
    """What the block's command prints on stdout now; RuntimeError when it fails."""
    with tempfile.TemporaryDirectory() as tmp:
        env = _shims(Path(tmp))
        if block.code is not None:
            argv = [sys.executable, "-c", block.code]
        else:
            # no pipefail: `| head` closes the pipe early; a failing command still changes the output
            argv = ["bash", "-c", block.command]
        proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    if proc.returncode != 0:
        raise RuntimeError(f"{block.name} ({block.command}) exited {proc.returncode}: "
                           f"{proc.stderr.strip().splitlines()[-1:] or ''}")
    return proc.stdout


DURATION = r"\d[\d,]*(?:\.\d+)?\s?(?:us|ms|s)"
TIMINGS = [
    # a solve's status line and a degree's row: "optimal (proven), 592.5 ms", "proven, 437.8 ms"
    re.compile(rf"(\b(?:proven|optimal|feasible|unknown)\)?, ){DURATION}\b"),
    re.compile(rf"(\bsolved in ){DURATION}\b"),
]


def normalized(output: str) -> str:
    """``output`` with wall-clock timings masked: what --check compares."""
    lines, in_timed_table = [], False
    for line in output.splitlines():
        if re.search(r"\stime\s*$", line):
            in_timed_table = True
        elif in_timed_table and re.search(rf"\s{DURATION}\s*$", line):
            line = re.sub(rf"\s+{DURATION}\s*$", " <time>", line)
        else:
            in_timed_table = False
        for pattern in TIMINGS:
            line = pattern.sub(r"\1<time>", line)
        lines.append(line.rstrip())
    return "\n".join(lines).strip("\n")


# ----------------------------------------------------------------------------- prose numbers
# a number standing alone, or with a unit suffix glued on ("1.5x", "128k", "70B", "19%"): the
# number is what is compared; digits inside names ("H100", "llama-3.1-70b", "WSE-3T") are not numbers
NUMBER = re.compile(r"(?<![\w.,/#-])(\d+(?:[.,]\d+)*)(?:[xkKMBT%])?(?![\w/-])")


def prose(text: str) -> list[tuple[int, str]]:
    """The page's lines with generated blocks, fenced code, inline code, comments and link targets
    blanked out (line numbers kept)."""
    def blank(m: re.Match) -> str:
        return "\n" * m[0].count("\n")
    text = BLOCK.sub(blank, text)
    text = re.sub(r"```.*?```", blank, text, flags=re.S)
    text = re.sub(r"<!--.*?-->", blank, text, flags=re.S)
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        line = re.sub(r"`[^`]*`", " ", line)
        line = re.sub(r"\]\([^)]*\)", "]", line)           # link targets
        line = re.sub(r"https?://\S+", " ", line)
        out.append((number, line))
    return out


MONTHS = ("January February March April May June July August September October November December").split()


def _is_date(line: str, token: str) -> bool:
    """A year after a month's name ("October 2024"): a date a source is cited by, not a result."""
    return bool(re.fullmatch(r"(19|20)\d\d", token)
                and re.search(rf"\b(?:{'|'.join(MONTHS)}) {token}\b", line))


def unbacked_numbers(page: Path, text: str | None = None) -> list[str]:
    """Numbers in the page's prose that no block of the page shows or runs: ``page:line: number``."""
    text = page.read_text(encoding="utf-8") if text is None else text
    shown = set()
    for block in blocks(page, text):
        shown |= set(NUMBER.findall(block.body)) | set(NUMBER.findall(block.code or block.command))
    problems = []
    for number, line in prose(text):
        for token in NUMBER.findall(line):
            if re.fullmatch(r"\d", token) or token in shown or _is_date(line, token):
                continue
            problems.append(f"{_relative(page)}:{number}: {token}")
    return problems


# ----------------------------------------------------------------------------- the two jobs
def _outputs(found: list[Block], jobs: int) -> list[str | Exception]:
    def one(block: Block) -> str | Exception:
        try:
            return run(block)
        except (RuntimeError, subprocess.TimeoutExpired) as err:
            return err
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, found))


def differences(block: Block, output: str) -> list[str]:
    """A unified diff of the page's block against ``output`` (timings masked); empty when they agree."""
    shown, now = normalized(block.body), normalized(output)
    if shown == now:
        return []
    return list(difflib.unified_diff(shown.splitlines(), now.splitlines(), "page", "tool", lineterm="", n=1))


def check(paths: list[Path], jobs: int = 1, fast: bool = False) -> list[str]:
    """Every problem in ``paths``: blocks that differ from the tool, commands that fail, prose numbers
    (``fast``: the blocks tagged slow are not run)."""
    found = [b for page in paths for b in blocks(page) if not (fast and b.slow)]
    problems = []
    for block, output in zip(found, _outputs(found, jobs)):
        if isinstance(output, Exception):
            problems.append(f"{block.name} ({block.command}): the command failed: {output}")
            continue
        diff = differences(block, output)
        if diff:
            problems.append(f"{block.name} ({block.command}) differs from the tool:\n  " + "\n  ".join(diff[:40]))
    for page in paths:
        problems += [f"{p}: a number in prose that no block of the page shows (quote a block, or put an "
                     f"input in backticks)" for p in unbacked_numbers(page)]
    return problems


def regenerate(paths: list[Path], jobs: int = 1) -> list[str]:
    """Rewrite every block of ``paths`` from the tool; pages are written only when every command ran."""
    texts = {page: page.read_text(encoding="utf-8") for page in paths}
    found = [b for page in paths for b in blocks(page, texts[page])]
    outputs = _outputs(found, jobs)
    failures = [f"{b.name} ({b.command}): {o}" for b, o in zip(found, outputs) if isinstance(o, Exception)]
    if failures:
        return failures
    changed = []
    for page in paths:
        text = texts[page]
        mine = [(b, o) for b, o in zip(found, outputs) if b.page == page]
        for block, output in reversed(mine):
            if not differences(block, output) and block.body.endswith("\n"):
                continue                      # equal up to timings: keep the page as it is
            marker = f"<!-- placer-docs{'[' + ','.join(block.tags) + ']' if block.tags else ''}: {block.command} -->"
            fresh = f"{marker}\n```text\n{output.rstrip()}\n```\n<!-- /placer-docs -->"
            text = text[:block.span[0]] + fresh + text[block.span[1]:]
        if text != texts[page]:
            _write_atomically(page, text)
            changed.append(_relative(page))
    return [f"rewrote {p}" for p in changed]


def _write_atomically(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pages", nargs="*", type=Path, help="pages to treat (default: README.md and docs/*.md)")
    parser.add_argument("--check", action="store_true", help="compare instead of rewriting; exit 1 on a difference")
    parser.add_argument("--list", action="store_true", help="list the blocks")
    parser.add_argument("--fast", action="store_true", help="leave out the blocks tagged slow")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="commands run at once (default 2)")
    args = parser.parse_args(argv)
    paths = [p.resolve() for p in args.pages] or pages()
    if args.list:
        for block in (b for page in paths for b in blocks(page)):
            print(f"{block.name}{' [slow]' if block.slow else ''}: {block.command}")
        return 0
    start = time.monotonic()
    if args.check:
        problems = check(paths, args.jobs, args.fast)
        for p in problems:
            print(p)
        n = sum(1 for p in paths for b in blocks(p) if not (args.fast and b.slow))
        print(f"{len(problems)} problem(s) in {len(paths)} page(s), {n} block(s) run; "
              f"{time.monotonic() - start:.1f} s", file=sys.stderr)
        return 1 if problems else 0
    messages = regenerate(paths, args.jobs)
    for m in messages:
        print(m)
    return 1 if any(not m.startswith("rewrote ") for m in messages) else 0


if __name__ == "__main__":
    sys.exit(main())
