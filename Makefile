# The README's commands. Each one installs what it needs on a fresh machine.
PY      ?= python3
VENV    := .venv
VPY     := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
BENCHV  := .venv-bench
export PYTHONDONTWRITEBYTECODE :=

.PHONY: run test bench setup system-deps demo lint

$(VPY):
	$(PY) -m venv $(VENV)

$(STAMP): pyproject.toml | $(VPY)
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

# Debian's chromium (kaleido exports, browser tests), fonts, and pdflatex with booktabs (the LaTeX
# tables are compiled in the tests), when missing and running as root.
system-deps:
	@if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null; then \
	  missing=""; \
	  [ -x /usr/bin/chromium ] || missing="$$missing chromium"; \
	  fc-list 2>/dev/null | grep -qi liberation || missing="$$missing fonts-liberation"; \
	  if [ -n "$$missing" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null \
	    || echo "warning: could not install$$missing; browser tests and figure export tests are skipped"; fi; \
	  if ! command -v pdflatex >/dev/null; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    --no-install-recommends texlive-latex-base texlive-latex-recommended >/dev/null \
	    || echo "warning: could not install texlive; LaTeX tables are checked structurally only"; fi; \
	else echo "note: not root: chromium, fonts-liberation and texlive must already be installed, else those tests skip"; fi

run: $(STAMP)
	$(VPY) -m streamlit run dashboard/app.py --server.address 127.0.0.1

test: $(STAMP) system-deps
	$(VPY) -m pytest -q

demo: $(STAMP)
	$(VPY) demo_data/make_demo_data.py

lint: $(STAMP)
	$(VPY) -m ruff check analysis_core dashboard tests benchmarks demo_data

$(BENCHV)/.installed: pyproject.toml
	$(PY) -m venv $(BENCHV)
	$(BENCHV)/bin/pip install --quiet --upgrade pip
	# torch first and pinned: it is on local disk; an unpinned torch pulls gigabytes
	$(BENCHV)/bin/pip install --quiet torch==2.13.0 || echo "warning: torch not installable; PML column skipped"
	$(BENCHV)/bin/pip install --quiet -e . pytorch-metric-learning || $(BENCHV)/bin/pip install --quiet -e .
	touch $(BENCHV)/.installed

bench: $(BENCHV)/.installed
	$(BENCHV)/bin/python benchmarks/bench_engine.py
