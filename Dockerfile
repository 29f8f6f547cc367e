# Courier's one image: every process of the Procfile, chosen by the command (`web`, the default;
# `bot`, `worker`, `beat`, `release`), and the offline sandbox. Configuration comes only from the
# environment (README.md, "Configuration"); nothing of the checkout's .env goes in. docs/operating.md,
# "Containers", says how to run it; scripts/container-test builds and checks it with podman.
#
# The base is Debian bookworm's own Python 3.11 (requirements/base.txt pins for it). BASE may name
# another copy of debian:bookworm-slim (scripts/container-test makes one with debootstrap where no
# registry can be reached).
ARG BASE=debian:bookworm-slim

# --- build: the pinned requirements into a virtualenv, with a compiler for any sdist -------------
FROM ${BASE} AS build
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        python3 python3-venv python3-dev gcc libc6-dev ca-certificates \
    && rm -rf /var/lib/apt/lists/*
# A TLS-intercepting proxy's CA, when the build host sits behind one (scripts/container-test
# passes this machine's bundle); unset elsewhere.
ARG PIP_CERT
COPY requirements/base.txt requirements/constraints.txt /src/requirements/
RUN python3 -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir --disable-pip-version-check \
        -r /src/requirements/base.txt -c /src/requirements/constraints.txt \
    && /opt/venv/bin/pip uninstall --yes --quiet pip setuptools

# --- runtime: Python, the virtualenv and the code; no compiler, no pip, not root --------------------
FROM ${BASE}
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        python3 ca-certificates tzdata \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin \
    && groupadd --gid 10001 courier \
    && useradd --uid 10001 --gid courier --home-dir /var/lib/courier --shell /usr/sbin/nologin --no-log-init courier \
    && mkdir -p /var/lib/courier/sessions /var/lib/courier/media \
    && chown -R courier:courier /var/lib/courier
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    LANG=C.UTF-8 \
    PYTHONUNBUFFERED=1 \
    TELEGRAM_SESSION_DIR=/var/lib/courier/sessions \
    MEDIA_ROOT=/var/lib/courier/media
WORKDIR /app
# The code belongs to root and is read-only to the processes; what they write goes to the volumes.
COPY . /app
# Static files are collected (and compressed) now, so every web container serves the same ones;
# byte-code is compiled now, since the processes cannot write it beside the code.
RUN SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput --verbosity 0 \
    && python -m compileall -q /app
USER courier
# Session files (runbot's update position: keep it across upgrades) and files uploaded through the API.
VOLUME ["/var/lib/courier/sessions", "/var/lib/courier/media"]
EXPOSE 8000
# For the web process; compose.yaml turns it off for the others, which serve no http.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 CMD ["python", "deploy/container/healthcheck"]
ENTRYPOINT ["/app/deploy/container/entrypoint"]
CMD ["web"]
