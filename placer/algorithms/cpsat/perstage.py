"""Moved to :mod:`placer.algorithms.cpsat.stage_degrees`; this path is kept for one release."""

from placer._moved import moved

moved(__name__)
