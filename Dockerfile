# One image for every service of docker-compose.yml: web, worker, beat and kubesim.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PORTAL_VAR_DIR=/data

WORKDIR /app
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt

COPY . .
RUN SECRET_KEY=build-only python manage.py collectstatic --noinput \
    && useradd --create-home portal \
    && mkdir -p /data && chown portal /data
USER portal

EXPOSE 8000
# Threads: a page's live watcher or an API long-poll holds one for up to its wait, and
# LIVE_WAITERS_MAX (8) of them per process must leave the rest free for everything else.
CMD ["gunicorn", "portal.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3", \
     "--worker-class", "gthread", "--threads", "16"]
