"""Moved to :mod:`placer.planning.sweep`; this path is kept for one release."""

from placer._moved import moved

moved(__name__)
