"""Moved to :mod:`placer.algorithms.stage_degrees`; this path is kept for one release."""

from placer._moved import moved

moved(__name__)
