"""The transport-neutral API: the request and response models every interface and the client share
(:mod:`context_engine.api.models`), and the engine calls the HTTP routes, the MCP tools and the CLI make
(:mod:`context_engine.api.calls`), so the same question gets the same answer whichever way it is asked.

Nothing here imports FastAPI, MCP, typer or httpx. The package itself imports nothing: the client reads the models
(pydantic and ``context_engine.schema`` only) without loading the calls, which import the service's pipelines.
"""
