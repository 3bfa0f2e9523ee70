"""Attribute getters shared by the libcst walk and the ``ast`` region pass (stdlib only: the
region pass runs without importing libcst)."""
from __future__ import annotations

import operator
from typing import Any


def _none(n: Any) -> tuple:
    return ()


def tuple_getter(names: tuple[str, ...]) -> Any:
    """A function returning the attributes ``names`` of an object as a tuple (``()`` for none,
    a 1-tuple for one: ``operator.attrgetter`` alone returns a bare value then)."""
    if not names:
        return _none
    if len(names) == 1:
        one = operator.attrgetter(names[0])
        return lambda n: (one(n),)
    return operator.attrgetter(*names)
