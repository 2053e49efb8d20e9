# The README's commands. Each one installs what it needs on a fresh machine.
PY      ?= python3
VENV    := .venv
VPY     := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
BENCHV  := .venv-bench
export PYTHONDONTWRITEBYTECODE :=

.PHONY: run test test-fast typecheck bench setup export-deps system-deps demo lint

$(VPY):
	$(PY) -m venv $(VENV)

$(STAMP): pyproject.toml setup.py | $(VPY)
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

# What figure export needs (report, the dashboard's downloads): Debian's chromium, which kaleido
# drives, and the Liberation fonts the figures use; installed when missing and running as root.
export-deps:
	@if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null; then \
	  missing=""; \
	  [ -x /usr/bin/chromium ] || missing="$$missing chromium"; \
	  fc-list 2>/dev/null | grep -qi liberation || missing="$$missing fonts-liberation"; \
	  if [ -n "$$missing" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null \
	    || echo "warning: could not install$$missing; figure export (and its tests) need: apt-get install -y chromium fonts-liberation"; fi; \
	else [ -x /usr/bin/chromium ] || echo "note: not root: figure export needs chromium; run as root: apt-get install -y chromium fonts-liberation"; fi

# The tests also need pdflatex with booktabs (the LaTeX tables are compiled), poppler-utils
# (pdfinfo / pdffonts check the figures' page size and fonts) and R with car, lme4 and lmerTest (the
# oracle of the ANOVA tables and the mixed models; those tests skip without it).
system-deps: export-deps
	@if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null; then \
	  if ! command -v pdflatex >/dev/null; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    --no-install-recommends texlive-latex-base texlive-latex-recommended >/dev/null \
	    || echo "warning: could not install texlive; LaTeX tables are checked structurally only"; fi; \
	  if ! command -v pdfinfo >/dev/null; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    poppler-utils >/dev/null || echo "warning: could not install poppler-utils; figure size tests skip"; fi; \
	  if ! Rscript -e 'library(lmerTest); library(car); library(survey)' >/dev/null 2>&1; then apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends r-base-core r-cran-car \
	    r-cran-lme4 r-cran-lmertest r-cran-survey >/dev/null || echo "warning: could not install R; the R oracle tests skip"; fi; \
	else echo "note: not root: texlive and poppler-utils must already be installed, else those tests skip"; fi

run: $(STAMP) export-deps
	$(VPY) -m analysis_core dashboard

# over JOBS processes (pytest-xdist): each test goes to the next free worker, except that the tests
# of one xdist_group (a file's browser tests sharing one streamlit server, AppTest files sharing a
# module fixture) stay in one worker; JOBS=1 runs in this process
JOBS ?= 2
XDIST = $(if $(filter-out 0 1,$(JOBS)),-n $(JOBS) --dist loadgroup,)
test: $(STAMP) typecheck system-deps
	$(VPY) -m pytest -q $(XDIST)

# the loop of a change (< 3 min on 2 cores): tests/core without the tests marked slow, install,
# browser, latex, dask or r_oracle (markers: pyproject.toml); `make test` runs everything
FAST_MARKERS := not slow and not install and not browser and not latex and not dask and not r_oracle
test-fast: $(STAMP)
	$(VPY) -m pytest -q $(XDIST) tests/core -m "$(FAST_MARKERS)"

# the package's annotations (it ships py.typed): zero mypy errors (settings: pyproject.toml [tool.mypy])
typecheck: $(STAMP)
	$(VPY) -m mypy analysis_core

demo: $(STAMP)
	$(VPY) demo_data/make_demo_data.py

lint: $(STAMP)
	$(VPY) -m ruff check analysis_core analysis_core_dashboard tests benchmarks demo_data

$(BENCHV)/.installed: pyproject.toml
	$(PY) -m venv $(BENCHV)
	$(BENCHV)/bin/pip install --quiet --upgrade pip
	# torch first and pinned: it is on local disk; an unpinned torch pulls gigabytes
	$(BENCHV)/bin/pip install --quiet torch==2.13.0 || echo "warning: torch not installable; PML column skipped"
	$(BENCHV)/bin/pip install --quiet -e '.[bench]' pytorch-metric-learning || $(BENCHV)/bin/pip install --quiet -e '.[bench]'
	touch $(BENCHV)/.installed

bench: $(BENCHV)/.installed
	$(BENCHV)/bin/python benchmarks/bench_engine.py
	PYTHONPATH=. $(BENCHV)/bin/python benchmarks/bench_tile.py
