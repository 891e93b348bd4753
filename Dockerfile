# The portal's image: web, worker, beat, the follower and the migrations Job all run it
# (deploy/, docker-compose.yml). Multi-stage: wheels are built in `builder`; the runtime image
# holds a virtualenv of requirements-runtime.txt only (no compilers, no test tools), runs as
# the numeric user 10001 and needs no writable path but /tmp (the manifests mount an emptyDir
# there and make the root filesystem read-only). Static files and translations are built in
# `assets`.
#
#   docker build -t gpu-claims-portal .                    # the portal (default target)
#   docker build --target kubesim -t gpu-claims-kubesim .  # kubesim, compose's demo cluster

ARG PYTHON=python:3.11-slim

FROM ${PYTHON} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
RUN python -m venv /opt/venv
COPY requirements-runtime.txt requirements-dev.txt /tmp/
RUN /opt/venv/bin/pip install -r /tmp/requirements-runtime.txt

# kubesim reads the upstream schemas kubernetes-validate ships; nothing else in the image does.
FROM builder AS kubesim-builder
RUN grep -i '^kubernetes-validate==' /tmp/requirements-dev.txt > /tmp/kubesim.txt \
    && /opt/venv/bin/pip install -r /tmp/kubesim.txt

FROM ${PYTHON} AS base
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/venv/bin:$PATH \
    PORTAL_VAR_DIR=/tmp/portal \
    STATIC_ROOT=/app/staticfiles
# /data: compose's volume (kubesim's kubeconfig and state); a new volume takes this owner.
RUN groupadd --gid 10001 portal && useradd --uid 10001 --gid 10001 --no-create-home portal \
    && mkdir /data && chown 10001:10001 /data
WORKDIR /app

FROM base AS kubesim
COPY --from=kubesim-builder /opt/venv /opt/venv
COPY kubesim/ kubesim/
COPY dracel/ dracel/
USER 10001
EXPOSE 6443
CMD ["python", "-m", "kubesim", "serve", "--host", "0.0.0.0", "--port", "6443"]

# Built once, read-only after: the static files (whitenoise serves them) and the compiled
# translations (compilemessages needs GNU gettext, which the runtime image goes without).
FROM base AS assets
RUN apt-get update && apt-get install -y --no-install-recommends gettext \
    && rm -rf /var/lib/apt/lists/*
COPY --from=builder /opt/venv /opt/venv
# The sources .dockerignore lets through: no tests, docs, benchmarks or manifests; and not
# kubesim, which has its own stage (the portal never imports it).
COPY . .
RUN SECRET_KEY=build-only python manage.py collectstatic --noinput \
    && if [ -d locale ]; then SECRET_KEY=build-only python manage.py compilemessages; fi \
    && rm -rf /tmp/portal kubesim

FROM base AS runtime
COPY --from=builder /opt/venv /opt/venv
COPY --from=assets /app /app
USER 10001
EXPOSE 8000
# Threads: a page's live watcher or an API long-poll holds one for up to its wait, and
# LIVE_WAITERS_MAX (112) of them per process must leave the rest (16) free for everything else.
CMD ["gunicorn", "portal.wsgi", "--config", "python:portal.gunicorn_conf", "--bind", "0.0.0.0:8000", "--workers", "3", \
     "--worker-class", "gthread", "--threads", "128", "--worker-tmp-dir", "/tmp"]
