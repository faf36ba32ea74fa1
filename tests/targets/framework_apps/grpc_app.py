"""gRPC's Python server with a generic handler (raw bytes, no generated code)."""

from concurrent import futures

import grpc

from common import work

METHOD = "/gilty.Work/Run"


def grpc_view(request, context):
    return work().encode()


def serve(port: int) -> None:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    handler = grpc.unary_unary_rpc_method_handler(grpc_view)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("gilty.Work", {"Run": handler}),))
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    server.wait_for_termination()


def call(port: int) -> bytes:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        return channel.unary_unary(METHOD)(b"x", timeout=10)
