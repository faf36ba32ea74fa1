import asyncio

import tornado.web

from common import work


class TornadoView(tornado.web.RequestHandler):
    def get(self):
        self.write(work())


async def _main(port: int) -> None:
    tornado.web.Application([(r"/", TornadoView)]).listen(port, "127.0.0.1")
    await asyncio.Event().wait()


def serve(port: int) -> None:
    asyncio.run(_main(port))
