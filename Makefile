# gilty: `make demo` and `make test` are the two entry points; both run `setup` first.
PYTHON ?= $(shell command -v pyenv >/dev/null 2>&1 && echo "$$(pyenv root)/versions/3.11.7/bin/python3" || echo python3)
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

# Debian packages the tests use: bpftrace is the independent reference for exact mode;
# prometheus scrapes the exporters; chromium loads the HTML report headless; wrk and nginx are the
# load generator's yardstick (bench/load_vs_wrk.py).
APT_PACKAGES := bpftrace prometheus chromium wrk nginx
# Debian packages with no command of their own to look for (checked with dpkg): gcc and Debian's
# python3.11 headers build the C extension of the native-stack tests (tests/integration/native_ext.py).
APT_DEV_PACKAGES := gcc python3.11-dev
# google's pprof reads gilty's pprof output back in the tests; built from the Go module proxy.
PPROF_VERSION := v0.0.0-20261105003125-4bf881d7fb0b
PPROF := $(VENV)/bin/pprof
# Parallel test workers for the tests not marked `alone`: they mostly wait on targets and servers,
# so more workers than the 2 CPUs of the test machine still shorten the run.
TEST_WORKERS ?= 3

.PHONY: help setup system-deps go-tools sid-pythons rust-test-build demo test lint bench wheel clean

help:  ## list targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

$(VPY):
	@test -x "$(PYTHON)" || { echo "no Python at $(PYTHON); set PYTHON=/path/to/python3.10+"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip

$(STAMP): $(VPY) requirements-dev.txt
	$(VPY) -m pip install -q -r requirements-dev.txt
	touch $(STAMP)

system-deps:  ## install the Debian packages the tests use (when root and missing)
	@missing=""; for p in $(APT_PACKAGES); do command -v $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	for p in $(APT_DEV_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else echo "not root: skipping apt-get install of$$missing (tests that need them will skip)"; fi; \
	fi

go-tools: $(VPY)  ## build google's pprof into .venv/bin (tests that need it skip, saying so, without Go)
	@test -x $(PPROF) || { command -v go >/dev/null 2>&1 && GOBIN=$(abspath $(VENV))/bin GOFLAGS=-mod=mod go install github.com/google/pprof@$(PPROF_VERSION) \
	  || echo "could not build pprof (no Go toolchain or module proxy): pprof tests will skip"; }

# Debian sid's python3.14/3.15 in a private root under /root/.cache/gilty/sid-pythons (tools/sid_pythons.py):
# fetched once when root, then only its stamp is read; where it cannot be had it says why and the tests skip.
sid-pythons:  ## fetch Debian sid's python3.14 and python3.15 into a private root (targets for the tests)
	@if command -v python3 >/dev/null 2>&1; then python3 tools/sid_pythons.py || echo "sid-pythons: tools/sid_pythons.py failed: tests on 3.14/3.15 skip"; \
	else echo "sid-pythons: no python3 to run tools/sid_pythons.py: tests on 3.14/3.15 skip"; fi

setup: $(STAMP)  ## build the Rust extension and install gilty into .venv, editable (CLI: .venv/bin/gilty)
	@# A version-specific build left from before the abi3 switch would be imported ahead of the abi3 one.
	@rm -f python/gilty/_native.cpython-*.so
	@# Linked by zig as the published wheel is, so the tests' wheel build reuses every compiled crate.
	$(VPY) tools/dev_build.py

demo: setup sid-pythons  ## start the bundled demo service, record it for 10 s, print the diagnosis; then load the web demo
	$(VPY) -m gilty.demo
	$(VPY) -m gilty.demo.web

# Lint: the Python tree formatted and checked by ruff (pyproject.toml [tool.ruff]), the Rust one by rustfmt
# and clippy with warnings as errors. `make test` runs it first: CI fails on an unformatted file.
lint: $(STAMP)  ## ruff format --check, ruff check, cargo fmt --check, cargo clippy -D warnings
	$(VENV)/bin/ruff format --check python tests bench tools
	$(VENV)/bin/ruff check python tests bench tools
	cargo fmt --all --check
	cargo clippy --release -q --workspace --all-targets -- -D warnings

test:  ## every test: lint, Rust unit tests, layout and opcode generator checks, Python unit + integration tests
	@# The Rust tests' host-linked build (target/) shares no crate with setup's zig-linked one
	@# (target/wheel-zig/), and setup spends much of its time fetching and unpacking packages: the
	@# builds run side by side, each target's output kept together.
	@# lint runs beside them too (it needs only ruff and cargo): an unformatted file still fails the run.
	@$(MAKE) --no-print-directory -j4 --output-sync=target setup system-deps go-tools sid-pythons rust-test-build lint
	cargo test --release -q --workspace --exclude gilty-python
	$(VPY) tools/gen_layouts.py --check
	$(VPY) tools/gen_opcodes.py --check
	@# Two parts: the tests whose figures hold whatever runs beside them, in parallel workers (a file
	@# each at a time, so its per-interpreter targets are made once); then those marked `alone`, one at
	@# a time, since they measure CPU time or latency against a reference, or check the whole checkout.
	@status=0; \
	$(VPY) -m pytest -q -ra --durations=20 -m "not alone" -n $(TEST_WORKERS) --dist loadfile tests || status=$$?; \
	$(VPY) -m pytest -q -ra --durations=20 -m alone tests || status=$$?; \
	exit $$status

rust-test-build:  ## compile the Rust tests (what `make test` runs beside `setup`)
	cargo test --release -q --workspace --exclude gilty-python --no-run

wheel: $(STAMP)  ## the wheel users install (abi3, manylinux_2_17 linked by zig, no debug info) into dist/
	PATH=$(abspath $(VENV))/bin:$$PATH $(VENV)/bin/maturin build --profile dist --zig --compatibility manylinux_2_17 -i $(VPY) -o dist

bench: setup  ## overhead benchmarks (results go in docs/benchmarks.md by hand, with the command)
	$(VPY) bench/overhead.py
	$(VPY) bench/exact_overhead.py
	$(VPY) bench/memory_cost.py

clean:  ## remove build products and the venv
	rm -rf target dist $(VENV)
