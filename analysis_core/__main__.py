import atexit
import os
import sys

from .cli import main

code = main()
# Everything is written and closed. Run the exit handlers (logging, temporary folders, Dask,
# Chromium), then leave without the interpreter's teardown of every module, which costs ~0.2 s
# after numba has run (LLVM's finalisers) and changes nothing the user sees.
try:
    sys.stdout.flush()
    sys.stderr.flush()
except (BrokenPipeError, ValueError):  # a closed pipe: nothing more can be said there
    code = code or 1
atexit._run_exitfuncs()
os._exit(code)
