"""Session-state keys, in one place."""

SOURCE = "data_source"          # "digits" | "many_classes" | "upload"
UPLOADS = "uploaded_files"      # the file_uploader widget's key
SIMILARITY = "similarity"
KS = "ks"

DEMO_SETS = {"digits": "Demo: handwritten digits (3 methods)", "many_classes": "Demo: 600 classes (2 checkpoints)"}
