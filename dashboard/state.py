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
