import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "opsconsole.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs Django set up first)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from opsconsole.access_log import AccessLog  # noqa: E402
from opsconsole.routing import websocket_urlpatterns  # noqa: E402

from opsconsole.beat import lifespan  # noqa: E402

router = ProtocolTypeRouter(
    {
        "http": AccessLog(django_asgi_app),
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)


async def application(scope, receive, send):
    # The server's start and stop (uvicorn's lifespan): the embedded console's beat starts and stops with it.
    if scope["type"] == "lifespan":
        return await lifespan(scope, receive, send)
    return await router(scope, receive, send)
