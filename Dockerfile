# syntax=docker/dockerfile:1
# triage-bot image: wheels built in a throwaway stage, installed into a slim runtime with no compilers.

FROM python:3.11-slim-bookworm AS builder
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# Every dependency ships manylinux wheels for 3.11, so no compiler is needed even here; any build tool a
# future dependency needs belongs in this stage only.
WORKDIR /src
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY handlers ./handlers
COPY storage ./storage
COPY templates ./templates
# One wheel for the app plus wheels for every dependency; the runtime stage installs only these.
RUN pip wheel --wheel-dir /wheels .

FROM python:3.11-slim-bookworm AS runtime
# The chart mounts the root filesystem read-only: caches (matplotlib's font cache) go to /tmp.
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PORT=3000 DATABASE_URL=sqlite:////data/triage.db \
    MPLCONFIGDIR=/tmp/matplotlib XDG_CACHE_HOME=/tmp/.cache
RUN groupadd --system --gid 10001 triage \
 && useradd --system --uid 10001 --gid 10001 --home-dir /home/triage --create-home --shell /usr/sbin/nologin triage \
 && mkdir -p /data && chown 10001:10001 /data
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-index --find-links=/wheels triage-bot
USER 10001:10001
WORKDIR /home/triage
EXPOSE 3000
VOLUME ["/data"]
ENTRYPOINT ["triage-bot"]
CMD ["serve"]
