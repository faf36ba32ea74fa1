from litestar import Litestar, get

from common import work


@get("/")
async def litestar_view() -> str:
    return work()


app = Litestar([litestar_view])
