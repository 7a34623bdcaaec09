# loopgate as a container (docs/deploy.md): the wheel is built in one stage and installed into a
# clean slim one, so neither the source tree nor the build's leftovers reach the image.
# tests/packaging/test_wheel.py runs what this file runs (the image itself is not built in CI).

FROM python:3.11-slim AS build
WORKDIR /src
# Only what the wheel is made of (.dockerignore keeps everything else out of the context).
# setup.py maps the folders to loopgate.gateway, … (loopgate/'s symlinks are not followed).
COPY pyproject.toml setup.py README.md LICENSE ./
COPY loopgate ./loopgate
COPY gateway ./gateway
COPY adapters ./adapters
COPY contracts ./contracts
COPY conformance/streams ./conformance/streams
RUN python -m pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11-slim
# The wheel arrives through a mount, so it is in no layer of the image. With the Redis extra,
# so that --journal redis:// (several instances sharing runs, docs/scale.md) runs from the image:
# pip takes loopgate-server[redis] from the wheel named before it, never from an index.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels python -m pip install --no-cache-dir --disable-pip-version-check /wheels/loopgate_server-*.whl 'loopgate-server[redis]'
# A numeric user, so Kubernetes' runAsNonRoot can tell it is not root; /data is its own.
RUN useradd --system --uid 10001 --user-group --no-log-init --home-dir /data --shell /usr/sbin/nologin loopgate \
    && mkdir -p /data \
    && chown 10001:10001 /data

# Beyond loopback a token is required: give LOOPGATE_TOKEN_FILE (a secret mounted at
# /run/secrets/…) or LOOPGATE_TOKEN; with neither, `loopgate serve` refuses to start.
# Runs and their events survive a restart in the journal on /data; the demo tools' files go
# under /data/workspace.
ENV PYTHONUNBUFFERED=1 \
    LOOPGATE_HOST=0.0.0.0 \
    LOOPGATE_PORT=8000 \
    LOOPGATE_JOURNAL=sqlite:/data/journal.sqlite3 \
    LOOPGATE_WORKSPACE=/data/workspace
VOLUME /data
WORKDIR /data
USER 10001:10001
EXPOSE 8000

# /healthz needs no token; no curl in a slim image, so Python asks. One line on failure.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import os, sys, urllib.request\n\ntry:\n    urllib.request.urlopen(\n        \"http://127.0.0.1:%s/healthz\" % os.environ.get(\"LOOPGATE_PORT\", \"8000\"), timeout=4\n    )\nexcept Exception as exc:\n    sys.exit(f\"loopgate is not healthy: {type(exc).__name__}\")"]

# docker stop sends SIGTERM: runs end with their terminal event, streams close, then exit.
ENTRYPOINT ["loopgate"]
CMD ["serve"]
