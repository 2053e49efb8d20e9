"""Checks of the settings users pass (API keywords, command-line options, dashboard controls):
each bad value raises :class:`~analysis_core.errors.InputError` naming the setting and the fix,
before any computation (a value the engine cannot take would otherwise fail deep inside it, or
worse, be taken: ``n_bins=0`` wrote outside its histogram)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from typing import Literal, overload

from .errors import InputError

_INT64_MAX = 2**63 - 1


def check_alpha(alpha, name: str = "alpha") -> float:
    """A significance level in (0, 1) (the intervals are ``1 - alpha``)."""
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not 0 < float(alpha) < 1:
        raise InputError("settings", f"{name} = {alpha!r} is not a significance level in (0, 1).",
                         f"use e.g. {name}=0.05 (95% intervals).")
    return float(alpha)


@overload
def check_int(value, name: str, minimum: int, *, none: Literal[False] = False, maximum: int = _INT64_MAX) -> int: ...
@overload
def check_int(value, name: str, minimum: int, *, none: bool, maximum: int = _INT64_MAX) -> int | None: ...
def check_int(value, name: str, minimum: int, *, none: bool = False, maximum: int = _INT64_MAX) -> int | None:
    """A whole number in [minimum, maximum] (an integral float such as 4.0 is taken as 4; 2.5,
    text and booleans are refused); ``None`` passes when ``none``."""
    if value is None and none:
        return None
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        ok = True  # exact, however large (a float test fails beyond 2^53)
    else:
        ok = not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(float(value)) \
            and float(value) == math.trunc(value)  # int() of a Real: its __trunc__
    if not ok or not minimum <= int(value) <= maximum:
        bound = f"from {minimum} to {maximum}" if maximum < _INT64_MAX or (ok and int(value) > maximum) \
            else f"of at least {minimum}"
        raise InputError("settings", f"{name} = {value!r} is not a whole number {bound}.",
                         f"give {name} a whole number {bound}" + (" (or leave it out)." if none else "."))
    return int(value)


def check_ks(ks) -> tuple[int, ...]:
    """The cut-offs k of Recall@K / P@K: a non-empty collection of whole numbers >= 1."""
    if isinstance(ks, (str, bytes)) or not isinstance(ks, Iterable) or getattr(ks, "ndim", 1) == 0:
        raise InputError("settings", f"ks = {ks!r} is not a list of cut-offs.", "give e.g. ks=(1, 2, 4, 8).")
    out = tuple(check_int(k, "every k", 1) for k in ks)
    if not out:
        raise InputError("settings", "ks is empty.", "give at least one cut-off, e.g. ks=(1, 2, 4, 8).")
    return out
