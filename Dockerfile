# chatops: one image for every process: `web`, `worker`, `runner` (and `doctor`, `runs`, `audit`, ...).
#
#   docker build -t chatops .                      # on python:3.11-slim-bookworm
#   docker run --env-file .env chatops web         # or worker, runner --target NAME, doctor
#
# BASE_IMAGE is any Debian bookworm image: python:3.11-slim-bookworm (the default), or a plain Debian
# one without Python (debian:bookworm-slim, or the debootstrap base `make image` builds where nothing can
# be pulled): then python3 comes from Debian's packages. Both stages use the same base, so the venv's
# interpreter is at the same path in the final image. Build tools never reach the final image: every
# dependency ships a manylinux wheel, installed in the build stage; the final stage copies the venv.
# docs/DEPLOY.md has the details (podman needs --format docker to keep the HEALTHCHECK).
ARG BASE_IMAGE=python:3.11-slim-bookworm

FROM ${BASE_IMAGE} AS build
# python3 and venv from Debian when the base has no Python of its own.
RUN set -eu; \
    if ! command -v python3 >/dev/null 2>&1 || ! python3 -c 'import ensurepip, venv' 2>/dev/null; then \
        apt-get update -qq; \
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 python3-venv >/dev/null; \
        rm -rf /var/lib/apt/lists/*; \
    fi; \
    python3 -c 'import sys; assert sys.version_info >= (3, 11), sys.version'
WORKDIR /src
COPY pyproject.toml README.md deploy/docker/requirements.lock ./
COPY agent agent
COPY tools tools
COPY bot bot
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
# PIP_INDEX_URL: a PyPI mirror. A TLS-intercepting proxy's CA bundle comes in as a build secret
# (`--secret id=ca-bundle,src=/etc/ssl/certs/ca-certificates.crt`), used by pip here and kept out of
# every layer. --only-binary: a dependency without a wheel fails the build instead of needing a compiler.
# The dependencies come from requirements.lock, every file checked against its hash (--require-hashes):
# the versions the tests ran with, whatever PyPI or a mirror serves today; then chatops itself, alone.
ARG PIP_INDEX_URL=https://pypi.org/simple
RUN --mount=type=secret,id=ca-bundle \
    set -eu; \
    if [ -s /run/secrets/ca-bundle ]; then export PIP_CERT=/run/secrets/ca-bundle; fi; \
    python3 -m venv /opt/chatops; \
    /opt/chatops/bin/pip install --quiet --index-url "$PIP_INDEX_URL" --only-binary=:all: --require-hashes \
        -r /src/requirements.lock; \
    /opt/chatops/bin/pip install --quiet --index-url "$PIP_INDEX_URL" --only-binary=:all: --no-deps /src; \
    /opt/chatops/bin/pip check; \
    /opt/chatops/bin/pip uninstall --quiet -y pip; \
    /opt/chatops/bin/chatops --help >/dev/null

FROM ${BASE_IMAGE}
# The runtime needs python3 only (no venv module, no pip, no compiler).
RUN set -eu; \
    if ! command -v python3 >/dev/null 2>&1; then \
        apt-get update -qq; \
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 >/dev/null; \
        rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin; \
    fi; \
    groupadd --system --gid 10001 chatops; \
    useradd --system --uid 10001 --gid chatops --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin chatops; \
    install -d -m 0700 -o 10001 -g 10001 /var/lib/chatops-runner  # a runner's spent grants (a volume)
COPY --from=build /opt/chatops /opt/chatops
COPY --chmod=0755 deploy/docker/healthcheck.py /opt/chatops/bin/chatops-healthcheck
COPY manifest.json /app/manifest.json
# /app is the working directory: `chatops doctor` compares scopes with ./manifest.json, and a
# mounted /app/.env would be read (prefer environment variables). Nothing in it is writable.
WORKDIR /app
# HOME=/tmp: the user has no home; tools' programs (kubectl's cache) write under /tmp, the one
# writable place (a tmpfs or emptyDir under a read-only root filesystem).
ENV PATH=/opt/chatops/bin:$PATH \
    HOME=/tmp \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    CHATOPS_LOG_FORMAT=json \
    WEB_HOST=0.0.0.0 \
    PORT=3000
USER 10001:10001
EXPOSE 3000
STOPSIGNAL SIGTERM
# For `web`: GET /healthz on its port (200 while Redis answers); other commands have no HTTP
# endpoint, so for them it reports healthy while their process runs (deploy/docker/healthcheck.py).
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 CMD ["chatops-healthcheck"]
ENTRYPOINT ["chatops"]
CMD ["web"]
