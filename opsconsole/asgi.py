import gc
import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "opsconsole.settings")
django.setup(set_prefix=False)  # what django.core.asgi.get_asgi_application does, with the console's handler

from django.urls import get_resolver  # noqa: E402  (needs Django set up first)

from opsconsole.handler import OneHopASGIHandler  # noqa: E402

django_asgi_app = OneHopASGIHandler()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from opsconsole.access_log import AccessLog  # noqa: E402
from opsconsole.beat import lifespan  # noqa: E402
from opsconsole.routing import websocket_urlpatterns  # noqa: E402

router = ProtocolTypeRouter(
    {
        "http": AccessLog(django_asgi_app),
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)

# The URLconf (every view module) loaded now, then everything loaded so far left out of the garbage
# collector's passes: it lives as long as the process. Without this each full pass walked some
# 120,000 objects (63 ms of CPU, measured at load; docs/benchmarks.md), every few dozen ingest batches.
get_resolver().url_patterns  # noqa: B018
gc.freeze()


async def application(scope, receive, send):
    # The server's start and stop (uvicorn's lifespan): the embedded console's beat starts and stops with it.
    if scope["type"] == "lifespan":
        return await lifespan(scope, receive, send)
    return await router(scope, receive, send)
