from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from common import work


async def starlette_view(request):
    return PlainTextResponse(work())


app = Starlette(routes=[Route("/", starlette_view)])
