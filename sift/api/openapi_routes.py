"""`GET /v1/openapi.json`: the API's own OpenAPI 3.1 document, served without a key.

The document ships as package data and is read once per process; tests check that it names
every route and status the server can answer, so it cannot drift from the code unnoticed.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from aiohttp import web

routes = web.RouteTableDef()


@cache
def document() -> bytes:
    """The raw JSON document, as shipped in the package."""
    return resources.files("sift.api").joinpath("openapi.json").read_bytes()


@routes.get("/v1/openapi.json")
async def openapi(request: web.Request) -> web.Response:
    return web.Response(body=document(), content_type="application/json")
