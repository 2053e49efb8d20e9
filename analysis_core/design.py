"""The design of the methods: every method is a (family, run, step) (SPEC §1, "Design of the methods").

- ``family``: the configuration being compared (a loss, an architecture).
- ``run``: one training of it (a seed); ``""`` when the family has a single, unnamed run.
- ``step``: a checkpoint of that run; missing (``None``) when the method is no checkpoint.

From names (:meth:`Design.from_names`), by these documented patterns, case-insensitive:

- a **step** ends the name: ``e10``, ``ep5``, ``epoch_3``, ``step_500``, ``it2000``, ``iter-20``,
  ``ckpt3``, ``checkpoint7`` (:mod:`analysis_core.methods`);
- a **run** is a token ``seed<N>``, ``run<N>``, ``rep<N>``, ``replicate<N>`` or ``trial<N>`` (an
  optional ``_`` or ``-`` before the number), anywhere in the name, between the separators ``_``,
  ``-``, ``.``, ``/``;
- the **family** is what is left once the step and the run token are taken out (separators at its
  ends dropped): ``triplet_seed0_e10`` is (``triplet``, ``seed0``, 10), ``seed1/proxyanchor`` is
  (``proxyanchor``, ``seed1``, none), ``mlp32_e3`` is (``mlp32``, ``""``, 3), ``pixels`` is
  (``pixels``, ``""``, none).

Or given as a table (:meth:`Design.from_table`): CSV or DataFrame with columns ``method, family,
run, step`` (``run`` and ``step`` may be empty), one row per method.

A **curve** is the checkpoints of one run of one family in step order: its name is the method name
without the step (``triplet_seed0``) for a design from names, ``family`` (``family_run`` with a run)
for a table. Methods without a step are never a training curve.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NamedTuple

from .demo import missing_file_fix
from .errors import InputError
from .methods import checkpoint_of, natural_key

if TYPE_CHECKING:
    import pandas as pd

COLUMNS = ("method", "family", "run", "step")
_RUN = re.compile(r"(?:^|(?<=[_\-./]))(?P<run>(?:seed|run|rep|replicate|trial)[_\-]?\d+)(?=$|[_\-./])",
                  re.IGNORECASE)
_SEPARATORS = "_-./"


def parse_name(name: str) -> tuple[str, str, int | None, str]:
    """(family, run, step, curve) of one method name by the patterns of this module's docstring."""
    ck = checkpoint_of(name)
    stem, step = (ck.family, ck.step) if ck is not None else (name, None)
    runs = list(_RUN.finditer(stem))
    run = ""
    family = stem
    if runs:
        m = runs[-1]  # the last run token: "a_run1_seed2" is seed2 of family a_run1
        run = m.group("run")
        left, right = stem[:m.start()], stem[m.end():]
        # joined by the separator that stood before the token: "a_seed1_b" -> "a_b"
        join = left[-1] if left and right.strip(_SEPARATORS) and left.rstrip(_SEPARATORS) else ""
        family = (left.rstrip(_SEPARATORS) + join + right.lstrip(_SEPARATORS)).strip(_SEPARATORS)
    curve = stem if step is not None else name
    return family, run, step, curve


class Row(NamedTuple):
    """One method's place in the design (``step`` None: no checkpoint)."""

    method: str
    family: str
    run: str
    step: int | None
    curve: str


@dataclass(frozen=True)
class Design:
    """The design of the methods: ``rows`` in method order (``table``: the same as a DataFrame with
    columns ``method, family, run, step, curve``, ``step`` a nullable integer); ``source``:
    ``"names"`` or the table's origin. Plain tuples: reading names imports no pandas."""

    rows: tuple[Row, ...]
    source: str = "names"

    @property
    def table(self) -> pd.DataFrame:
        import pandas as pd

        t = pd.DataFrame([r._asdict() for r in self.rows], columns=[*COLUMNS, "curve"])
        t["step"] = pd.array([r.step for r in self.rows], dtype="Int64")
        for c in ("method", "family", "run", "curve"):
            t[c] = t[c].astype(object)
        return t

    # ---- construction -------------------------------------------------------------------------
    @classmethod
    def from_names(cls, methods: Iterable[str]) -> Design:
        """The design the method names encode (module docstring)."""
        return cls(tuple(Row(m, *parse_name(m)) for m in methods), "names")

    @classmethod
    def from_table(cls, table: pd.DataFrame | Mapping[str, Any] | str | Path, methods: Iterable[str]) -> Design:
        """A design given as a table (a DataFrame, a mapping of columns, or a CSV path) naming every
        one of ``methods`` once; raises :class:`InputError` naming the problem and the fix."""
        import pandas as pd

        methods = list(methods)
        source = "design table"
        if isinstance(table, (str, Path)):
            source = Path(table).name
            frame = read_csv(table)
        else:
            try:
                frame = pd.DataFrame(table).astype(object)
            except (ValueError, TypeError) as exc:
                raise InputError(source, f"not a table ({exc}).",
                                 "pass a DataFrame or a dict of columns method, family, run, step.") from None
        frame.columns = [str(c).strip().lower() for c in frame.columns]
        if "method" not in frame.columns or "family" not in frame.columns:
            raise InputError(source, f"the design table needs the columns method and family (has "
                             f"{list(frame.columns)}).", "add a header line method,family,run,step; run and step "
                             "may be left empty.")
        unknown = [c for c in frame.columns if c not in COLUMNS]
        if unknown:
            raise InputError(source, f"unknown column(s) {unknown} in the design table.",
                             f"use the columns {', '.join(COLUMNS)}.")
        frame = frame.reindex(columns=list(COLUMNS))
        text = {c: [_text(v) for v in frame[c]] for c in ("method", "family", "run")}
        twice = sorted({m for m in text["method"] if text["method"].count(m) > 1})
        missing = [m for m in methods if m not in text["method"]]
        extra = [m for m in text["method"] if m not in methods]
        if twice or missing or extra:
            raise InputError(source, "the design table must name every method once: "
                             + "; ".join(p for p in (f"missing {missing}" if missing else "",
                                                     f"unknown {extra}" if extra else "",
                                                     f"repeated {twice}" if twice else "") if p),
                             f"list each of the methods {methods} in one row.")
        empty = [m for m, f in zip(text["method"], text["family"], strict=True) if not f]
        if empty:
            raise InputError(source, f"no family for method(s) {empty}.", "give every method a family (a method "
                             "compared on its own is a family of its own: use its name).")
        steps: list[int | None] = []
        for m, v in zip(text["method"], frame["step"], strict=True):
            cell = _text(v)
            if not cell:
                steps.append(None)
                continue
            try:
                f = float(cell)
            except ValueError:
                f = math.nan
            if not math.isfinite(f) or f != int(f) or f < 0:
                raise InputError(source, f"step {cell!r} of method {m!r} is not a whole number >= 0.",
                                 "give the checkpoint's step (epoch, iteration) as an integer, or leave it empty.")
            steps.append(int(f))
        rows: list[dict[str, Any]] = []
        for m, fam, r, st in zip(text["method"], text["family"], text["run"], steps, strict=True):
            rows.append(dict(method=m, family=fam, run=r, step=st, curve=fam if not r else f"{fam}_{r}"))
        seen: dict[tuple, str] = {}
        for row in rows:
            key = (row["family"], row["run"], row["step"])
            if key in seen and row["step"] is not None:
                raise InputError(source, f"methods {seen[key]!r} and {row['method']!r} are the same family, run and "
                                 f"step {key}.", "give each checkpoint of a run its own step.")
            seen[key] = row["method"]
        order: dict[Any, int] = {m: i for i, m in enumerate(methods)}
        rows.sort(key=lambda r: order[r["method"]])
        return cls(tuple(Row(r["method"], r["family"], r["run"], r["step"], r["curve"]) for r in rows), source)

    @classmethod
    def of(cls, design: Design | pd.DataFrame | Mapping[str, Any] | str | Path | None,
           methods: Iterable[str]) -> Design:
        """``design`` for ``methods`` (from their names when None; a Design restricted to them)."""
        methods = list(methods)
        if design is None:
            return cls.from_names(methods)
        if isinstance(design, Design):
            by_method = {r.method: r for r in design.rows}
            missing = [m for m in methods if m not in by_method]
            if missing:
                raise InputError(design.source, f"the design has no row for method(s) {missing}.",
                                 "give a design naming every method.")
            return cls(tuple(by_method[m] for m in methods), design.source)
        return cls.from_table(design, methods)

    # ---- questions ----------------------------------------------------------------------------
    @property
    def methods(self) -> list[str]:
        return [r.method for r in self.rows]

    @property
    def content(self) -> tuple[tuple[str, str, str, int | None], ...]:
        """(method, family, run, step) of every method in method order: what a design table says
        (equal designs, equal content; hashable, a cache key)."""
        return tuple((r.method, r.family, r.run, r.step) for r in self.rows)

    def runs_of(self) -> dict[str, list[str]]:
        """Family -> its runs in natural order (``[""]`` for a family of one unnamed run)."""
        out: dict[str, list[str]] = {}
        for row in self.rows:
            out.setdefault(row.family, [])
            if row.run not in out[row.family]:
                out[row.family].append(row.run)
        return {f: sorted(rs, key=natural_key) for f, rs in sorted(out.items(), key=lambda kv: natural_key(kv[0]))}

    @property
    def has_runs(self) -> bool:
        """Whether some family has two or more runs (run-level statistics apply)."""
        return any(len(rs) >= 2 for rs in self.runs_of().values())

    @property
    def has_steps(self) -> bool:
        return any(r.step is not None for r in self.rows)

    def curves(self) -> dict[str, list[tuple[str, int]]]:
        """Curve -> [(method, step)] in step order, for the methods with a step (curves in natural
        order); empty without steps: methods in their order are no training curve."""
        out: dict[str, list[tuple[str, int]]] = {}
        for r in self.rows:
            if r.step is not None:
                out.setdefault(r.curve, []).append((r.method, r.step))
        return {c: sorted(v, key=lambda p: p[1]) for c, v in sorted(out.items(), key=lambda kv: natural_key(kv[0]))}

    def final_methods(self) -> pd.DataFrame:
        """One row per (family, run): the method of its last step (its only method when it has
        no step), columns ``family, run, method, step``. A (family, run) with several methods
        that have no step is ambiguous and not a run: each such method then stands for a run of
        its own name."""
        import pandas as pd

        groups: dict[tuple[str, str], list[Row]] = {}
        for row in self.rows:
            groups.setdefault((row.family, row.run), []).append(row)
        rows: list[dict[str, Any]] = []
        for (f, r), part in groups.items():
            stepped = [p for p in part if p.step is not None]
            if stepped:
                last = max(stepped, key=lambda p: p.step or 0)
                rows.append(dict(family=f, run=r, method=last.method, step=last.step))
            elif len(part) == 1:
                rows.append(dict(family=f, run=r, method=part[0].method, step=None))
            else:
                rows += [dict(family=f, run=p.method, method=p.method, step=None) for p in part]
        rows.sort(key=lambda d: (natural_key(str(d["family"])), natural_key(str(d["run"]))))
        out = pd.DataFrame(rows, columns=["family", "run", "method", "step"])
        out["step"] = pd.array([d["step"] for d in rows], dtype="Int64")
        return out

    def describe(self) -> str:
        """The design as ``check`` prints it: each family with its runs and steps."""
        fam = self.runs_of()
        lines = [f"  design ({'from method names' if self.source == 'names' else self.source}): "
                 f"{len(fam)} famil{'y' if len(fam) == 1 else 'ies'}"
                 + (", runs are replicate trainings" if self.has_runs else ", no replicate runs")
                 + ("" if self.has_steps else ", no checkpoint steps (no training curve)")]
        for f, runs in fam.items():
            steps = sorted({r.step for r in self.rows if r.family == f and r.step is not None})
            run_text = f"{len(runs)} run{'s' if len(runs) != 1 else ''}" + (
                f" ({', '.join(runs)})" if runs != [""] else "")
            step_text = f", steps {', '.join(map(str, steps))}" if steps else ""
            lines.append(f"    {f or '(no family name)'}: {run_text}{step_text}")
        return "\n".join(lines)


def read_csv(path: str | Path | IO[bytes], name: str | None = None) -> pd.DataFrame:
    """A design table's CSV (a path, or an open binary file such as an upload named ``name``) as
    text cells, empty cells as ``""``; raises :class:`InputError` when it is missing or no CSV."""
    import pandas as pd

    where = name or str(path)
    try:
        return pd.read_csv(path, dtype=str, keep_default_na=False, skipinitialspace=True)
    except FileNotFoundError:
        raise InputError(where, "design file not found.", missing_file_fix(where) or "give the path of a CSV file "
                         "with columns method,family,run,step.") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise InputError(where, f"cannot read the design table as CSV ({exc}).",
                         "write it as a CSV file with a header line method,family,run,step.") from None


def _text(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return str(v).strip()

