"""A WSGI app for uWSGI that builds 30 MiB of its own objects at import (issue 31): preloaded, the
master holds them and the workers share them; with --lazy-apps every worker builds its own copy,
which is what `gilty memory` must count per worker (its --http router holds none of it)."""
import decimal
import email.parser
import http.client
import json
import xml.dom.minidom

# About 30 MiB of distinct str objects (each ~56 bytes of header plus its text).
BALLAST = [f"{i:>24}" for i in range(400_000)]
MODULES = (decimal, email.parser, http.client, json, xml.dom.minidom)


def serve_request(n):
    return sum(len(BALLAST[i]) for i in range(n))  # LINE:serve_request


def application(environ, start_response):
    serve_request(20_000)
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok\n"]
