"""A trio program (no asyncio tasks to read): prints "ready", then sleeps in trio."""
import trio


async def main():
    print("ready", flush=True)
    await trio.sleep(3600)


trio.run(main)
