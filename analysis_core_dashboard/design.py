"""The sidebar's design table: every method's (family, run, step) the evaluation uses — read from
the method names, or from an uploaded CSV, and editable — validated by
:meth:`analysis_core.design.Design.from_table` (SPEC §1, "Design of the methods")."""

from __future__ import annotations

import io
from collections.abc import Sequence

import pandas as pd
import streamlit as st

from analysis_core import InputError
from analysis_core.design import COLUMNS, Design, read_csv
from analysis_core_dashboard import cache, components, state

STEP_HELP = "A whole number >= 0 (epoch, iteration), or empty: the method is no checkpoint."
# widths (pixels) that fit the four columns side by side in the sidebar (app.py's width) for names
# like proxyanchor_seed2_e10; the method stays in view when longer names scroll the table sideways
COLUMN_CONFIG = {"method": st.column_config.TextColumn("method", width=150, pinned=True),
                 "family": st.column_config.TextColumn("family", width=72),
                 "run": st.column_config.TextColumn("run", width=50),
                 "step": st.column_config.TextColumn("step", width=42, help=STEP_HELP)}
Rows = tuple[tuple[str, str, str, int | None], ...]  # Design.content


def text_table(design: Design) -> pd.DataFrame:
    """The design as the editor shows it: text cells, an empty step for a method without one."""
    return pd.DataFrame([(m, f, r, "" if s is None else str(s)) for m, f, r, s in design.content],
                        columns=list(COLUMNS))


def resolve(table: pd.DataFrame, methods: Sequence[str]) -> tuple[Design, Rows]:
    """The design ``table`` gives ``methods`` and its rows for the token — the names' design and
    ``()`` when it is the one their names give (the evaluation is then the one every session
    without a design table shares). Raises :class:`InputError` naming the problem and the fix."""
    names = Design.from_names(methods)
    if _same_text(table, text_table(names)):
        return names, ()  # unedited: even where the names give no family (a method named "epoch_3")
    design = Design.from_table(table, methods)
    return (names, ()) if design.content == names.content else (design, design.content)


def _same_text(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    """Whether two design tables hold the same text in the same rows (empty cells as "")."""
    def text(t: pd.DataFrame) -> list[list[str]]:
        return t.reindex(columns=list(COLUMNS)).fillna("").astype(str).map(str.strip).to_numpy().tolist()

    return text(a) == text(b)


def editor(methods: Sequence[str], digest: str) -> None:
    """The sidebar's "Design" expander for the dataset ``digest`` with ``methods``: an optional
    design CSV, the table (from the CSV, else from the names) with family, run and step editable,
    and the design it describes. Sets :data:`state.DESIGN` (rows, ``()`` from the names) and
    :data:`state.DESIGN_ERROR` (the message, or None; the pages show it instead of results)."""
    error = None
    st.session_state[state.DESIGN] = ()
    with st.sidebar.expander("Design (family, run, step)"):
        st.caption("Each method is a checkpoint (step) of one training run (e.g. a seed) of a family (the "
                   "configuration compared, e.g. a loss). Read from the names (`triplet_seed0_e10`); edit the table "
                   "or upload a CSV with columns method, family, run, step to say otherwise.")
        up = st.file_uploader("Design table (CSV)", type=["csv"], key=state.DESIGN_UPLOAD)
        base, base_id = text_table(Design.from_names(methods)), digest
        if up is not None:
            data = up.getvalue()
            try:
                base = text_table(Design.from_table(read_csv(io.BytesIO(data), up.name), methods))
                base_id = f"{digest}/{cache.content_digest(data)}"
            except InputError as exc:
                error = str(exc)
        if error is None:
            if st.session_state.get(state.DESIGN_BASE) != base_id:
                # another dataset or design file: edits of the previous table are no edits of this one
                st.session_state.pop(state.DESIGN_EDITOR, None)
                st.session_state[state.DESIGN_BASE] = base_id
            edited = st.data_editor(base, key=state.DESIGN_EDITOR, hide_index=True, num_rows="fixed",
                                    disabled=["method"], width="stretch",
                                    column_config=COLUMN_CONFIG)
            try:
                design, st.session_state[state.DESIGN] = resolve(edited, methods)
                st.caption("  \n".join(components.literal(line.strip()) for line in design.describe().splitlines()))
            except InputError as exc:
                error = str(exc)
    if error is not None:
        st.sidebar.error(f"**Design table:** {components.literal(error)}")
    st.session_state[state.DESIGN_ERROR] = error
