"""Session-state keys, in one place."""

SOURCE = "data_source"          # a DEMO_SETS name | "upload"
UPLOADS = "uploaded_files"      # the file_uploader widget's key
SIMILARITY = "similarity"
PRECISION = "precision"         # "float32" | "float64": the dtype similarities are computed in
KS = "ks"
ALPHA = "alpha"
UNIT = "unit"                   # "class" | "query": what intervals and method comparisons generalise over
EXPORT_PRESET = "export_preset"  # "single" | "double" | "custom"
EXPORT_WIDTH = "export_width_in"
EXPORT_FONT = "export_font"
EXPORT_FONT_SIZE = "export_font_size"
EXPORT_LINE = "export_line_width"
COMPUTE_MODE = "compute_mode"   # "process" | "local" | "scheduler"
COMPUTE_WORKERS = "compute_workers"
COMPUTE_ADDRESS = "compute_address"
QUERY_SAMPLE = "query_sample"   # 0 = every query
QUERY_SEED = "query_seed"
UPLOAD_DIGESTS = "_upload_digests"  # the uploader's file id -> content digest (each upload hashed once)
DATASET = "_dataset"            # (digest, Dataset) or None
ERROR = "_error"                # the InputError that stopped loading, or None

DESIGN_UPLOAD = "design_upload"  # the design CSV uploader's key
DESIGN_EDITOR = "design_editor"  # the design table's data_editor key (its edits)
DESIGN_BASE = "_design_base"    # what the design editor's table was made from (the dataset, the design CSV)
DESIGN = "_design"              # the design's rows (method, family, run, step); () = from the method names
DESIGN_ERROR = "_design_error"  # why the design table can't be used, or None

SPLIT = "split"                 # "" = every item in one gallery, else one split as its own retrieval problem

DEMO_SETS = {"digits": "Demo: handwritten digits (3 methods)", "many_classes": "Demo: 600 classes (2 checkpoints)",
             "training": "Demo: a training run (zero-shot digits, 10 checkpoints)",
             "digits_runs": "Demo: 3 losses x 3 seeds (zero-shot digits, checkpoints)"}

# The link to a view (analysis_core_dashboard/url_state.py): the keys of the page pickers kept in the URL, by the
# page's URL path; the key is the query parameter's name.
PAGE_PICKERS = {
    "pr_bands": ("bands_methods", "bands_classes", "np"),
    "statistics": ("stats_methods", "stats_classes"),
    "per_query": ("pq_methods", "pq-method"),
    "class_count": ("cc_method", "cc-classes", "cc-group"),
    "embedding_map": ("map-method",),
}
FRAGMENT_PICKERS = ("bands_methods", "bands_classes", "pq-method")  # inside a fragment: url_state.picker
SERVER_FILES = "server_files"   # the data directory's files picked (DASHBOARD_DATA_DIR)
KEPT_UPLOAD = "_kept_upload"    # (token or None, from this session's uploader?, digest) of the upload kept for a reload
URL_START = "_url_start"        # the query parameters the session was opened with
URL_SPLIT = "_url_split"        # the link's split, until a dataset with splits is loaded
URL_NOTES = "_url_notes"        # [(warning?, text)]: what the link asked for that could not be shown, and why
URL_CHECKED = "_url_checked"    # (data source, page) the link opened: its notes show while both are shown
