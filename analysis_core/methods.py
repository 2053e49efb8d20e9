"""Method names: natural order (``e3`` before ``e10``) and checkpoints of a training run.

A method is a **checkpoint** when its name ends in a step marker and a number — ``e10``,
``epoch_3``, ``ep5``, ``step_500``, ``it2000``, ``iter-20``, ``ckpt3`` — after an optional
**family** prefix separated by ``_``, ``-``, ``.`` or ``/`` (``triplet_e3`` and
``proxyanchor_e3`` are two families; ``run1/step_500`` is family ``run1``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import NamedTuple

_CHECKPOINT = re.compile(r"^(?:(?P<family>.*?)[_\-./])?(?:e|ep|epoch|step|it|iter|iteration|ckpt|checkpoint)[_\-]?"
                         r"(?P<step>\d+)$", re.IGNORECASE)


def natural_key(name: str) -> tuple:
    """Sort key that compares runs of digits as numbers: ``e3`` < ``e10``, ``step_500`` <
    ``step_1000``; text compares case-insensitively, then exactly (a total order)."""
    parts = re.split(r"(\d+)", name)
    return tuple((0, int(p), p) if p.isdigit() else (1, p.lower(), p) for p in parts if p != ""), name


def order_methods(names: Iterable[str], order: Sequence[str] | None = None) -> list[str]:
    """``names`` in natural order, or in ``order`` (which must name each of them exactly once)."""
    names = list(names)
    if order is None:
        return sorted(names, key=natural_key)
    order = list(order)
    missing = [n for n in names if n not in order]
    unknown = [n for n in order if n not in names]
    twice = sorted({n for n in order if order.count(n) > 1})
    if missing or unknown or twice:
        raise ValueError(f"the method order must name every method once: missing {missing}, unknown {unknown}, "
                         f"repeated {twice}; methods are {names}")
    return order


class Checkpoint(NamedTuple):
    family: str  # "" when the name has no family prefix
    step: int


def checkpoint_of(name: str) -> Checkpoint | None:
    """The (family, step) a method name encodes, or None when it is not a checkpoint name."""
    m = _CHECKPOINT.match(name)
    if m is None:
        return None
    return Checkpoint(m.group("family") or "", int(m.group("step")))
