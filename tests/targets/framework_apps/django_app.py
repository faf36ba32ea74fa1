"""One Django project in a file: a sync view (served by WSGI) and an async one (served by ASGI)."""

import django
from django.conf import settings
from django.http import HttpResponse
from django.urls import path

from common import work

settings.configure(DEBUG=False, ALLOWED_HOSTS=["*"], ROOT_URLCONF=__name__, SECRET_KEY="gilty-test", MIDDLEWARE=[])
django.setup()


def django_sync_view(request):
    return HttpResponse(work())


async def django_async_view(request):
    return HttpResponse(work())


urlpatterns = [path("", django_sync_view), path("async", django_async_view)]


def wsgi():
    from django.core.wsgi import get_wsgi_application

    return get_wsgi_application()


def asgi():
    from django.core.asgi import get_asgi_application

    return get_asgi_application()
