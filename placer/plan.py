"""Moved to :mod:`placer.planning.budget`; this path is kept for one release.

``placer.plan`` is now also the planning entry point (:func:`placer.planning.plan`): this module
re-exports the budget and replica searches under their old path and, called, plans.
"""

import sys
import types
import warnings

from placer.planning import budget as _budget
from placer.planning.budget import *  # noqa: F403
from placer.planning.budget import __all__  # noqa: F401

warnings.warn("placer.plan has moved to placer.planning.budget; the old import path is kept for one release",
              DeprecationWarning, stacklevel=2)


class _CallablePlanModule(types.ModuleType):
    """The old module, callable as :func:`placer.planning.plan` (``placer.plan(...)`` keeps planning)."""

    def __call__(self, *args, **kwargs):
        from placer.planning import plan

        return plan(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(_budget, name)


sys.modules[__name__].__class__ = _CallablePlanModule
