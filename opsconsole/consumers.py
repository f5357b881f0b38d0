"""The console's websockets: one run's live updates, or one project's.

`ws/runs/<run id>/` and `ws/projects/<slug>/` (opsconsole/routing.py), behind
AllowedHostsOriginValidator and the session (AuthMiddlewareStack). What they
send is described in opsconsole/live.py.

Authorization is checked on connect and again before every frame in either
direction, against the session as it is now (a logout, a password change, a
deactivated account or a removed membership all count): a caller who may no
longer see the run or project gets the socket closed with 4403 (4401 when no
longer logged in) instead of the frame. Refusals on connect are sent after
accepting, so the browser sees the close code (a handshake refused before
accept reaches it as a bare 1006) and does not retry.

Clients may send {"type": "ping"} (answered {"type": "pong"}); anything else is
answered {"type": "error", "error": "..."}.
"""
from importlib import import_module
from types import SimpleNamespace

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from django.contrib import auth

from opsconsole.live import project_group, run_group
from opsconsole.permissions import visible_projects, visible_runs

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403


def current_user(scope):
    """The user the connection's session stands for now, read afresh (not the one cached at connect)."""
    session = scope.get("session")
    key = getattr(session, "session_key", None)
    if key:
        store = import_module(settings.SESSION_ENGINE).SessionStore(key)
        return auth.get_user(SimpleNamespace(session=store))
    user = scope.get("user")
    if user is None or not user.is_authenticated:
        return None
    # No session in the scope (a scope built by hand): the same user, reloaded.
    return auth.get_user_model()._default_manager.filter(pk=user.pk, is_active=True).first()


class _LiveConsumer(AsyncJsonWebsocketConsumer):
    group_name = None
    target_pk = None

    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            return await self._refuse(CLOSE_UNAUTHENTICATED)
        self.target_pk = await database_sync_to_async(self.find_target)(user)
        if self.target_pk is None:
            # Missing and not visible are one answer: a refusal says nothing about what exists.
            return await self._refuse(CLOSE_FORBIDDEN)
        self.group_name = self.group_for(self.target_pk)
        await self.channel_layer.group_add(self.group_name, self.channel_name)
        await self.accept()

    async def _refuse(self, code):
        await self.accept()
        await self.close(code=code)

    async def disconnect(self, code):
        if self.group_name is not None:
            await self.channel_layer.group_discard(self.group_name, self.channel_name)
            self.group_name = None

    # -- authorization, again, before every frame --

    def still_allowed_sync(self):
        user = current_user(self.scope)
        if user is None or not user.is_authenticated:
            return CLOSE_UNAUTHENTICATED
        return None if self.may_see(user, self.target_pk) else CLOSE_FORBIDDEN

    async def _check_or_close(self) -> bool:
        if self.group_name is None:
            return False  # refused or already closed
        refusal = await database_sync_to_async(self.still_allowed_sync)()
        if refusal is None:
            return True
        await self.channel_layer.group_discard(self.group_name, self.channel_name)
        self.group_name = None
        await self.close(code=refusal)
        return False

    async def live_message(self, event):
        """A group message from opsconsole.live: its frames are forwarded only while the caller may still see them."""
        if await self._check_or_close():
            for frame in event["frames"]:
                await self.send_json(frame)

    # -- frames from the client --

    async def receive(self, text_data=None, bytes_data=None, **kwargs):
        if not await self._check_or_close():
            return
        if text_data is None:
            return await self.send_json({"type": "error", "error": "binary frames are not understood; send JSON text"})
        try:
            content = await self.decode_json(text_data)
        except ValueError:
            return await self.send_json({"type": "error", "error": "not JSON"})
        if isinstance(content, dict) and content.get("type") == "ping":
            return await self.send_json({"type": "pong"})
        await self.send_json({"type": "error", "error": 'unknown message; the only one understood is {"type": "ping"}'})

    # -- per kind of target --

    def find_target(self, user):
        raise NotImplementedError

    def may_see(self, user, pk) -> bool:
        raise NotImplementedError

    def group_for(self, pk) -> str:
        raise NotImplementedError


class RunConsumer(_LiveConsumer):
    """ws/runs/<run id>/: the run's points, alerts and status."""

    def find_target(self, user):
        run_id = self.scope["url_route"]["kwargs"]["run_id"]
        return visible_runs(user).filter(run_id=run_id).values_list("pk", flat=True).first()

    def may_see(self, user, pk):
        return visible_runs(user).filter(pk=pk).exists()

    def group_for(self, pk):
        return run_group(pk)


class ProjectConsumer(_LiveConsumer):
    """ws/projects/<slug>/: the same messages for every run of the project (the inbox)."""

    def find_target(self, user):
        slug = self.scope["url_route"]["kwargs"]["slug"]
        return visible_projects(user).filter(slug=slug).values_list("pk", flat=True).first()

    def may_see(self, user, pk):
        return visible_projects(user).filter(pk=pk).exists()

    def group_for(self, pk):
        return project_group(pk)
