"""`GET /`: a short page saying what this server is, its version, and where to go next.

Someone who opens the server's address in a browser (an admin after `serve`, a curious
fediverse user following a link) gets an answer instead of a 404. It reads the settings only,
never the database, so it costs an unauthenticated caller nothing worth throttling.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fedqueue import __version__
from fedqueue.web.console_render import render
from fedqueue.web.responses import settings_of


async def home(request: Request) -> Response:
    settings = settings_of(request)
    name = settings.node_name or urlsplit(settings.base_url).netloc
    return render(request, "home.html", name=name, version=__version__)


routes = [Route("/", home, methods=["GET"])]
