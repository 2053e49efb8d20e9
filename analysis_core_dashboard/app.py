"""Entry point: page config, navigation, and the shared sidebar (dataset, similarity, precision, cutoffs,
significance level, export settings, split, the design of the methods). An unexpected exception
anywhere becomes a short message with an error id; its traceback goes to the server log, never to
the browser."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from analysis_core import InputError
from analysis_core.io.numpy_files import OverBudget
from analysis_core.methods import natural_key
from analysis_core_dashboard import cache, components, design, state, uploads, url_state

# the favicon from a file, sent inline as a data URL: an emoji or ":material/...:" icon makes the
# browser fetch it from a CDN (fonts.gstatic.com), and the server is meant to work offline
st.set_page_config(page_title="Embedding retrieval evaluation", page_icon=str(Path(__file__).with_name("icon.svg")),
                   layout="wide", initial_sidebar_state=400)  # wide enough for the design table


def sidebar() -> None:
    with st.sidebar:
        st.header("Data")
        labels = url_state.sources()
        src = st.radio("Dataset", list(labels), format_func=labels.get, key=state.SOURCE)
        if src == "upload":
            ups = st.file_uploader("Embeddings (.npz, .npy + labels, .csv, .parquet); several files = several methods",
                                   type=["npz", "npy", "csv", "parquet", "txt"], accept_multiple_files=True,
                                   key=state.UPLOADS)
            ups = uploads.stored(ups or [])  # the upload store's bytes, not the widget's copies
            uploads.let_go(ups)  # removed files' bytes given back now, not at the next rerun
            refused = uploads.refusal(ups)  # files whose bytes the server's budget did not keep
            digest = (cache.upload_digest(ups, st.session_state.setdefault(state.UPLOAD_DIGESTS, {}))
                      if ups and not refused else None)

            def read() -> list[tuple[str, bytes]]:
                return [(u.name, u.getvalue()) for u in ups]
            if not ups:  # a reload or a link: the upload kept in the server's memory, if any
                digest, read = url_state.restored_upload()
        elif src == url_state.SERVER:
            ups, refused = [], None
            digest, read = url_state.server_source()
        else:
            ups, refused = [], None
            files = cache.demo_files(src)
            digest = cache.files_digest(files)

            def read() -> list[tuple[str, bytes]]:
                return files
        notes = st.empty()  # filled once the files are read: what the loaders assumed, which labels file pairs
        st.selectbox("Similarity", ["cosine", "dot", "euclidean"], key=state.SIMILARITY, bind="query-params")
        st.radio("Precision", ["float32", "float64"], key=state.PRECISION, horizontal=True, bind="query-params",
                 help="The dtype similarities are computed in. float64 keeps near-equal scores of float64 "
                      "embeddings apart that float32 rounding would merge into ties (float32 uploads are "
                      "upcast); it costs more time.")
        st.multiselect("Cutoffs K", [1, 2, 4, 8, 16, 32], default=[1, 2, 4, 8], key=state.KS, bind="query-params")
        st.select_slider("Significance level α", [0.001, 0.01, 0.05, 0.1], value=0.05, key=state.ALPHA,
                         bind="query-params")
        st.radio("Unit of inference", ["class", "query"], key=state.UNIT, horizontal=True, bind="query-params",
                 help="What intervals and method comparisons generalise over. class (default): new items of new "
                      "classes — a jackknife that deletes each class from the queries and the gallery (queries "
                      "that share a gallery are dependent). query: these trained models and this gallery, new "
                      "queries of these classes only.")
        with st.expander("Export settings (figures for papers)"):
            st.radio("Size", ["single", "double", "custom"], index=1, key=state.EXPORT_PRESET, horizontal=True,
                     format_func={"single": "single column (3.5 in)", "double": "double column (7.2 in)",
                                  "custom": "custom"}.get)
            if st.session_state.get(state.EXPORT_PRESET) == "custom":
                st.number_input("Width (in)", 2.0, 12.0, 5.0, 0.1, key=state.EXPORT_WIDTH)
            st.selectbox("Font", ["Liberation Sans, Arial, sans-serif", "Liberation Serif, Times New Roman, serif"],
                         key=state.EXPORT_FONT)
            st.slider("Font size (pt)", 6, 14, 9, key=state.EXPORT_FONT_SIZE)
            st.slider("Line width", 0.5, 3.0, 1.5, 0.25, key=state.EXPORT_LINE)
            st.caption("Colours: Okabe–Ito, colour-blind safe. PDF and SVG are vector with real text.")
        with st.expander("Compute (large data)"):
            mode = st.radio("Run the pass", ["process", "local", "scheduler"], key=state.COMPUTE_MODE,
                            format_func={"process": "in this process", "local": "local Dask cluster",
                                         "scheduler": "existing Dask scheduler"}.get)
            if mode == "local":
                st.number_input("Workers", 1, 64, 2, key=state.COMPUTE_WORKERS)
            elif mode == "scheduler":
                st.text_input("Scheduler address", "tcp://127.0.0.1:8786", key=state.COMPUTE_ADDRESS)
            st.caption("Results are identical in every mode. On one machine this process is fastest; a cluster "
                       "pays off with several machines (see the cost model in docs/benchmarks.md).")
            st.number_input("Query sample (0 = every query)", 0, None, 0, 100, key=state.QUERY_SAMPLE,
                            help="Evaluate a stratified random sample of queries against the whole gallery; "
                                 "every mean gets an interval at the sidebar's significance level.")
            if st.session_state.get(state.QUERY_SAMPLE):
                st.number_input("Sample seed", 0, None, 0, key=state.QUERY_SEED)
    st.session_state[state.ERROR] = refused
    st.session_state[state.DATASET] = None
    st.session_state[state.DESIGN] = ()
    st.session_state[state.DESIGN_ERROR] = None
    if digest is None:
        return
    try:
        ds = cache.dataset(digest, read, st.session_state.get(state.SIMILARITY, "cosine"))
        st.session_state[state.DATASET] = (digest, ds)
        if src == "upload" and ups:
            url_state.keep_upload(ups, digest)
        if ds.notes:  # user file names, shown literally
            notes.caption("  \n".join(components.literal(n) for n in ds.notes))
        split_selector(ds)
        design.editor(ds.methods, digest)
    except InputError as exc:
        st.session_state[state.ERROR] = str(exc)  # the text only: the exception's frames hold the data
        if isinstance(exc, OverBudget):
            uploads.release(ups, str(exc))  # over the budget: their bytes given back, the message kept
    except MemoryError:
        st.session_state[state.ERROR] = ("loading these files needs more memory than this server has free. Use "
                                         "the command line on a larger machine, or upload fewer or smaller files.")
    except Exception:  # noqa: BLE001 - a loader bug: an id on the page, the traceback in the log
        st.session_state[state.ERROR] = components.unexpected("loading the files")


def split_selector(ds) -> None:
    """Every item in one gallery, or one split as its own retrieval problem: every page follows."""
    if ds.split is None:
        st.session_state[state.SPLIT] = ""
        return
    splits = sorted(set(ds.split.tolist()), key=natural_key)
    url_state.seed_split(splits)
    if st.session_state.get(state.SPLIT) not in ("", *splits):
        st.session_state[state.SPLIT] = ""
    st.sidebar.selectbox("Split", ["", *splits], key=state.SPLIT,
                         format_func=lambda s: f"split: {s}" if s else "all items (one gallery)",
                         help="A split is evaluated as its own retrieval problem: its queries against its own "
                              "items only (the zero-shot protocol for held-out classes).")


def main() -> None:
    uploads.guard_upload_store()  # the server's upload store in its budget (once per server)
    uploads.share_upload_copies()  # a rerun's copy of an upload shares its bytes (once per server)
    url_state.restore()  # a session's first run: the data and split its URL names, before any widget
    sidebar()
    url_state.write_source()
    link = st.sidebar.empty()
    notices = st.empty()
    loaded = st.session_state.get(state.DATASET)
    ds = loaded[1] if loaded else None
    pages = [
        st.Page("views/overview.py", title="Overview", icon=":material/dashboard:", default=True),
        st.Page("views/per_query.py", title="Per query & class", icon=":material/search:"),
        st.Page("views/pr_bands.py", title="PR bands", icon=":material/show_chart:"),
        st.Page("views/statistics.py", title="Statistics", icon=":material/functions:"),
        st.Page("views/histograms.py", title="Similarity histograms", icon=":material/bar_chart:"),
        st.Page("views/class_count.py", title="Class count & group size", icon=":material/tune:"),
        st.Page("views/ties.py", title="Ties", icon=":material/link:"),
        st.Page("views/embedding_map.py", title="Embedding map", icon=":material/scatter_plot:"),
    ]
    if ds is not None and ds.has_confidence:
        pages.append(st.Page("views/confidence.py", title="Confidence", icon=":material/target:"))
    if ds is not None and ds.split is not None:
        pages.append(st.Page("views/generalization.py", title="Generalization", icon=":material/science:"))
    if ds is not None and len(ds.methods) > 1:
        pages.append(st.Page("views/training.py", title="Training", icon=":material/timeline:"))
    page = st.navigation(pages)
    url_state.leave_other_pages(page.url_path)
    page.run()
    url_state.finish(notices, link, page.url_path)


try:
    main()
except Exception:  # noqa: BLE001 - any page's bug: a message with an id instead of a traceback
    st.error(components.unexpected("this page"))
