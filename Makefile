# Every target creates the virtualenv it needs, so each works on a fresh clone.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: test lint typecheck demo browser clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

## The whole bot on this machine: Slack emulator page, scripted LLM, embedded Redis. Ctrl-C stops it.
## DEMO_ARGS="--port 3200 --scenario disk-full --latency 0 --no-browser"; LLM_BASE_URL=... uses a real model.
demo: $(STAMP)
	$(BIN)/python -m emulator.demo $(DEMO_ARGS)

## Lint, type-check, check import directions and run the whole test suite (Redis: REDIS_URL / 127.0.0.1:6379 if it answers, else an embedded one).
test: $(STAMP) browser
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	PYTHONPATH=. $(BIN)/lint-imports
	$(BIN)/pytest -n 2 -q

## Debian's Chromium (and an emoji font) for the browser test, installed with apt when missing and
## possible (root, or passwordless sudo); otherwise the browser test is skipped and says why.
CHROMIUM ?= /usr/bin/chromium
BROWSER_PACKAGES ?= chromium fonts-liberation fonts-noto-color-emoji
browser:
	@if [ -x "$(CHROMIUM)" ]; then \
		exit 0; \
	elif ! command -v apt-get >/dev/null 2>&1; then \
		echo "browser: $(CHROMIUM) is missing and apt-get is not available: the browser test will be skipped"; \
	elif [ "$$(id -u)" = 0 ]; then \
		echo "browser: installing $(BROWSER_PACKAGES) with apt-get"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(BROWSER_PACKAGES) >/dev/null \
			|| echo "browser: apt-get could not install $(BROWSER_PACKAGES): the browser test will be skipped"; \
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then \
		echo "browser: installing $(BROWSER_PACKAGES) with sudo apt-get"; \
		sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(BROWSER_PACKAGES) >/dev/null \
			|| echo "browser: apt-get could not install $(BROWSER_PACKAGES): the browser test will be skipped"; \
	else \
		echo "browser: $(CHROMIUM) is missing and installing needs root: the browser test will be skipped"; \
	fi

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	PYTHONPATH=. $(BIN)/lint-imports  # import directions: pyproject.toml [tool.importlinter]

typecheck: $(STAMP)
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .demo

# -- benchmarks (never part of `make test`) ------------------------------------------------------
BENCH_VENV  ?= bench/.venv
BENCH_BIN   := $(BENCH_VENV)/bin
BENCH_STAMP := $(BENCH_VENV)/.installed

$(BENCH_STAMP): pyproject.toml bench/requirements.txt
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_BIN)/pip install --quiet --upgrade pip
	$(BENCH_BIN)/pip install --quiet -e . -r bench/requirements.txt
	touch $(BENCH_STAMP)

## Run every benchmark (~15 min; peers in bench/.venv) and regenerate docs/BENCHMARKS.md and docs/bench/*.png.
bench: $(BENCH_STAMP)
	$(BENCH_BIN)/python -m bench.loop_overhead
	$(BENCH_BIN)/python -m bench.ingress
	$(BENCH_BIN)/python -m bench.approvals
	$(BENCH_BIN)/python -m bench.e2e
	$(BENCH_BIN)/python -m bench.burst
	$(BENCH_BIN)/python -m bench.scaleout
	$(BENCH_BIN)/python -m bench.report
