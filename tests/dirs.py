"""Where the tests find their inputs: the checkout, and the data folders under tests/.

Test files live one folder down (tests/<layer>/), so paths come from here rather than from each
file's own ``__file__``. Imported by name like the other helpers (tests/ is on ``sys.path``).
"""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent

FIXTURES = TESTS / "fixtures"
BAD_INPUTS = TESTS / "bad_inputs"
OK_INPUTS = BAD_INPUTS / "ok"
VENDORED = TESTS / "vendored"

BENCHMARKS = ROOT / "benchmarks"
SOLUTIONS = ROOT / "solutions"
MODELS = ROOT / "models"
TOOLS = ROOT / "tools"
