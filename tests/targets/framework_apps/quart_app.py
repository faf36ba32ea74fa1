from quart import Quart

from common import work

app = Quart(__name__)


@app.route("/")
async def quart_view():
    return work()
