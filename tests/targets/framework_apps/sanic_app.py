from sanic import Sanic
from sanic.response import text

from common import work

app = Sanic("gilty_frameworks")


@app.get("/")
async def sanic_view(request):
    return text(work())


def serve(port: int) -> None:
    app.run(host="127.0.0.1", port=port, single_process=True, access_log=False, motd=False)
