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

# Debian's chromium (kaleido exports, browser tests) and fonts, when missing and running as root.
system-deps:
	@if [ ! -x /usr/bin/chromium ] || ! fc-list 2>/dev/null | grep -qi liberation; then \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-liberation >/dev/null) \
	      || echo "warning: could not install chromium/fonts-liberation; browser tests will be skipped"; \
	  else echo "note: chromium or fonts-liberation missing and not root; browser tests will be skipped"; fi; \
	fi

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
