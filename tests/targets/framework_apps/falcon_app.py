import falcon

from common import work


class FalconResource:
    def on_get(self, req, resp):
        resp.text = work()


app = falcon.App()
app.add_route("/", FalconResource())
