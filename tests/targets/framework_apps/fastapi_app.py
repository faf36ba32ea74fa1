from fastapi import FastAPI
from fastapi.responses import PlainTextResponse

from common import work

app = FastAPI()


@app.get("/", response_class=PlainTextResponse)
async def fastapi_view():
    return work()
