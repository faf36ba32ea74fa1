import falcon.asgi

from common import work


class FalconAsgiResource:
    async def on_get(self, req, resp):
        resp.text = work()


app = falcon.asgi.App()
app.add_route("/", FalconAsgiResource())
