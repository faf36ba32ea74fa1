"""Views with known costs. REPORT_ROWS and SPIN_ITERATIONS (environment) size them."""

import os

from django.db import connection
from django.http import JsonResponse

REPORT_ROWS = int(os.environ.get("DJANGO_SITE_REPORT_ROWS", "200000"))
SPIN_ITERATIONS = int(os.environ.get("DJANGO_SITE_SPIN", "100000"))


def report(request):
    # sqlite counts in C with the GIL released: the view's time is native code, not Python.
    with connection.cursor() as cursor:
        cursor.execute(
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < %s) SELECT count(*) FROM c",
            [REPORT_ROWS],
        )
        (n,) = cursor.fetchone()
    return JsonResponse({"rows": n})


def spin(request):
    total = 0
    for i in range(SPIN_ITERATIONS):  # LINE:spin
        total += i * i % 7
    return JsonResponse({"total": total})


def ok(request):
    return JsonResponse({"ok": True})
