"""`GET /v1/openapi.json`: the API's own OpenAPI 3.1 document, served without a key.

The document ships as package data and is read once per process; tests check that it names
every route and status the server can answer, so it cannot drift from the code unnoticed. Its
`info.version` is the installed distribution's version (`sift.about`), the one `sift --version`
prints, so the two move together with each release (CHANGELOG.md).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources

from aiohttp import web

from sift import about

routes = web.RouteTableDef()


@cache
def document() -> bytes:
    """The JSON document as shipped in the package, with the installed version."""
    raw = resources.files("sift.api").joinpath("openapi.json").read_bytes()
    if about.version() == about.UNKNOWN:
        return raw
    doc = json.loads(raw)
    doc["info"]["version"] = about.version()
    return json.dumps(doc, indent=2, ensure_ascii=False).encode()


@routes.get("/v1/openapi.json")
async def openapi(request: web.Request) -> web.Response:
    return web.Response(body=document(), content_type="application/json")
