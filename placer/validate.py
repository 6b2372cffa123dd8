"""Moved to :mod:`placer.mapping.validate`; this path is kept for one release."""

from placer._moved import moved

moved(__name__)
