# Every target creates the virtualenv it needs, so each works on a fresh clone.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: test check lint typecheck demo browser sshd observability sentinel clean lock eval-record

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

## The whole bot on this machine: Slack emulator page, scripted LLM, embedded Redis. Ctrl-C stops it.
## DEMO_ARGS="--port 3200 --scenario disk-full --latency 0 --no-browser"; LLM_BASE_URL=... uses a real model.
demo: $(STAMP)
	$(BIN)/python -m emulator.demo $(DEMO_ARGS)

## Re-record the model runs CI replays (emulator/eval/recordings/) with their scripted agents, over the
## real wire: after a deliberate change of the system prompt, a tool definition or a scenario (docs/EVAL.md).
EVAL_RECORDED ?= deploy-broke-api
eval-record: $(STAMP)
	rm -rf .eval-record
	$(BIN)/python -m emulator.eval run $(foreach s,$(EVAL_RECORDED),--scenario $(s)) --record emulator/eval/recordings --out .eval-record

## Lint, type-check, check import directions and run the whole test suite (Redis: REDIS_URL / 127.0.0.1:6379 if it answers, else an embedded one).
test: $(STAMP) browser sshd observability sentinel deploy-tools
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	PYTHONPATH=. $(BIN)/lint-imports
	$(BIN)/pytest -n 2 -q

## The edit loop: lint, types, import directions and the tests not marked slow (`make test` stays the CI gate).
check: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	PYTHONPATH=. $(BIN)/lint-imports
	$(BIN)/pytest -n 2 -q -m "not slow"

## Debian's Chromium (and an emoji font) for the browser test, installed with apt when missing and
## possible (root, or passwordless sudo); otherwise the browser test is skipped and says why.
CHROMIUM ?= /usr/bin/chromium
BROWSER_PACKAGES ?= chromium fonts-liberation fonts-noto-color-emoji
browser:
	@.ci/apt-prerequisite browser "the browser test" "$(BROWSER_PACKAGES)" $(CHROMIUM)

## OpenSSH's server for the SSH target tests (tests/support/sshd.py starts it as the current user on
## a loopback port), installed with apt when missing and possible; otherwise those tests are skipped.
SSHD ?= /usr/sbin/sshd
SSHD_PACKAGES ?= openssh-server openssh-client
sshd:
	@.ci/apt-prerequisite sshd "the SSH tests" "$(SSHD_PACKAGES)" $(SSHD)

## Debian's redis-sentinel for the Redis Sentinel tests (tests/support/sentinel_group.py runs a master, a replica and
## three sentinels of each test's own on free loopback ports), installed with apt when missing and possible; otherwise
## those tests are skipped. policy-rc.d keeps apt from starting the package's service (port 26379) while it installs.
SENTINEL ?= /usr/bin/redis-sentinel
SENTINEL_PACKAGES ?= redis-sentinel
sentinel:
	@.ci/apt-prerequisite --no-service-start sentinel "the Redis Sentinel tests" "$(SENTINEL_PACKAGES)" $(SENTINEL)

## Debian's Prometheus and Alertmanager for the observability tools' tests (tests/support/observability.py
## runs its own instances on free loopback ports, storage in tmp), installed with apt when missing and
## possible; otherwise those tests are skipped. policy-rc.d keeps apt from starting the packages'
## services (ports 9090/9093) while it installs them; a unit they enabled starts only at the next boot.
PROMETHEUS ?= /usr/bin/prometheus
ALERTMANAGER ?= /usr/bin/prometheus-alertmanager
OBSERVABILITY_PACKAGES ?= prometheus prometheus-alertmanager
observability:
	@.ci/apt-prerequisite --no-service-start observability "the Prometheus and Alertmanager tests" \
		"$(OBSERVABILITY_PACKAGES)" $(PROMETHEUS) $(ALERTMANAGER)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	PYTHONPATH=. $(BIN)/lint-imports  # import directions: pyproject.toml [tool.importlinter]

typecheck: $(STAMP)
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .demo .image-build.log .lock-venv

# -- container image (never part of `make test`: it takes minutes) ------------------------------
.PHONY: image image-tools deploy-tools
## Build the Dockerfile with podman (chroot isolation: no daemon, no container started) and smoke-test
## the image's filesystem: mounted read-only, `chatops --help`, a web + worker start with chroot as its
## user against REDIS_URL (deploy/docker/smoke_image.py says what it checks). IMAGE_BASE defaults to a
## Debian bookworm base built here with debootstrap (nothing can be pulled on this machine); elsewhere
## `make image IMAGE_BASE=python:3.11-slim-bookworm`. Needs root (mounts); installs podman and
## debootstrap with apt when missing.
IMAGE       ?= localhost/chatops:dev
LOCAL_BASE  := localhost/chatops-base:bookworm
IMAGE_BASE  ?= $(LOCAL_BASE)
CA_BUNDLE   ?= /etc/ssl/certs/ca-certificates.crt
IMAGE_PACKAGES ?= podman debootstrap
## deploy/docker/requirements.lock: the image's runtime dependencies at the test venv's versions, hashed,
## resolved for every Python 3.11 (Debian bookworm's is 3.11.2: redis needs async-timeout there).
LOCK := deploy/docker/requirements.lock
lock: $(STAMP)
	@test -x .lock-venv/bin/uv || { $(PYTHON) -m venv .lock-venv && .lock-venv/bin/pip install --quiet uv; }
	@$(BIN)/pip freeze --exclude-editable | grep -v '^chatops' > .lock-venv/tested.txt
	@.lock-venv/bin/uv pip compile --quiet pyproject.toml --universal --python-version 3.11 --generate-hashes \
		--no-header --no-annotate --constraint .lock-venv/tested.txt --output-file .lock-venv/lock.txt
	@{ sed -n '1,/^$$/p' $(LOCK); cat .lock-venv/lock.txt; } > .lock-venv/new.txt && mv .lock-venv/new.txt $(LOCK)
	@echo "lock: $(LOCK) has $$(grep -c '==' $(LOCK)) pinned packages"

image-tools:
	@if ! command -v podman >/dev/null 2>&1 || ! command -v debootstrap >/dev/null 2>&1; then \
		echo "image: installing $(IMAGE_PACKAGES) with apt-get"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(IMAGE_PACKAGES) >/dev/null; \
	fi

image: $(STAMP) image-tools
	@start=$$(date +%s); \
	if [ "$(IMAGE_BASE)" = "$(LOCAL_BASE)" ]; then deploy/docker/local-base.sh $(LOCAL_BASE) || exit 1; fi; \
	secret=$$([ -s "$(CA_BUNDLE)" ] && echo "--secret id=ca-bundle,src=$(CA_BUNDLE)"); \
	echo "image: podman build --isolation chroot --format docker --build-arg BASE_IMAGE=$(IMAGE_BASE) -t $(IMAGE) ."; \
	podman build --isolation chroot --format docker $$secret --build-arg BASE_IMAGE=$(IMAGE_BASE) -t $(IMAGE) . >.image-build.log 2>&1 \
		|| { tail -n 30 .image-build.log; exit 1; }; \
	podman image prune -f >/dev/null; \
	echo "image: built $(IMAGE) ($$(podman image inspect --format '{{.Size}}' $(IMAGE)) bytes) in $$(( $$(date +%s) - start )) s (log: .image-build.log)"; \
	$(BIN)/python deploy/docker/smoke_image.py $(IMAGE) || exit 1; \
	echo "image: done in $$(( $$(date +%s) - start )) s"

## visudo (Debian's sudo) for tests/deploy's check of the sudoers example, installed with apt when missing
## and possible; otherwise that check is skipped and says why. systemd-analyze comes with systemd.
VISUDO ?= /usr/sbin/visudo
deploy-tools:
	@.ci/apt-prerequisite deploy-tools "the sudoers check (visudo -c)" sudo $(VISUDO)

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
	$(BENCH_BIN)/python -m bench.fleet
	$(BENCH_BIN)/python -m bench.alerts
	$(BENCH_BIN)/python -m bench.charts
	$(BENCH_BIN)/python -m bench.runbooks
	$(BENCH_BIN)/python -m bench.memory
	$(BENCH_BIN)/python -m bench.changes
	$(BENCH_BIN)/python -m bench.changes_read
	$(BENCH_BIN)/python -m bench.eval_suite
	$(BENCH_BIN)/python -m bench.report
