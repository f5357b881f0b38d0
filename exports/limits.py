"""How many exports may stream at once: EXPORT_MAX_CONCURRENT_PER_PROJECT per project, EXPORT_MAX_CONCURRENT_PER_TOKEN
per token (a project's or a person's; a signed-in person counts as one token).

An export takes a slot of its project and of its token before it starts, and gives both back when its stream
ends, fails, or its client goes away (the response's iterator is closed, or dropped). Beyond a limit the
request is answered 429 with Retry-After.

With REDIS_URL the slots are in Redis, so the limits hold across every web process: a slot is a member of a
sorted set scored by when its lease ends; a process renews the leases of its own streams every LEASE_SECONDS / 3
(a thread), so a process that dies mid-stream frees its slots within LEASE_SECONDS. Without Redis (the embedded
console, one process) they are counted in the process; so are they while Redis is unreachable (logged), so
that an outage neither refuses every export nor lifts the limits altogether.
"""
from __future__ import annotations

import logging
import threading
import uuid
import weakref

from django.conf import settings
from rest_framework import exceptions

from opsconsole.breaker import Breaker

log = logging.getLogger(__name__)

LEASE_SECONDS = 30.0
RETRY_AFTER_SECONDS = 5
PREFIX = "wl:export-slots:"
REDIS = Breaker("exports: slots in Redis", logger=log)

# KEYS: the slot sets; ARGV: lease seconds, member, then each key's limit. 0 when taken, else the full key's index.
# Redis' own clock, so that processes on several hosts agree on when a lease ends.
_TAKE = """
local now = redis.call('TIME')
local t = tonumber(now[1]) + tonumber(now[2]) / 1000000
local lease = tonumber(ARGV[1])
for i, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', t)
  if redis.call('ZCARD', key) >= tonumber(ARGV[2 + i]) then return i end
end
for i, key in ipairs(KEYS) do
  redis.call('ZADD', key, t + lease, ARGV[2])
  redis.call('EXPIRE', key, math.ceil(lease) + 1)
end
return 0
"""
# KEYS: slot sets; ARGV: lease seconds, then members (one per key). Leases of slots still held are pushed back.
_RENEW = """
local now = redis.call('TIME')
local t = tonumber(now[1]) + tonumber(now[2]) / 1000000
local lease = tonumber(ARGV[1])
for i, key in ipairs(KEYS) do
  if redis.call('ZADD', key, 'XX', 'CH', t + lease, ARGV[1 + i]) == 1 then
    redis.call('EXPIRE', key, math.ceil(lease) + 1)
  end
end
return 0
"""


class ExportsBusy(exceptions.Throttled):
    def __init__(self, message: str):
        super().__init__(wait=RETRY_AFTER_SECONDS, detail=message)


class LocalSlots:
    """Slots counted in this process."""

    def __init__(self):
        self._lock = threading.Lock()
        self._held: dict[str, int] = {}

    def take(self, keys, limits, member) -> int:
        with self._lock:
            for i, (key, limit) in enumerate(zip(keys, limits), 1):
                if self._held.get(key, 0) >= limit:
                    return i
            for key in keys:
                self._held[key] = self._held.get(key, 0) + 1
        return 0

    def give_back(self, keys, member) -> None:
        with self._lock:
            for key in keys:
                left = self._held.get(key, 0) - 1
                if left > 0:
                    self._held[key] = left
                else:
                    self._held.pop(key, None)

    def reset(self) -> None:
        with self._lock:
            self._held.clear()


class RedisSlots:
    """Slots in Redis, leased; the leases of this process's slots are renewed by one thread while they are held."""

    def __init__(self):
        self._lock = threading.Lock()
        self._clients = {}
        self._held: dict[str, tuple[str, ...]] = {}  # member -> keys
        self._renewer = None
        self._idle = threading.Event()  # set when the last slot is given back: the renewer ends at once

    def client(self):
        import redis

        url = settings.REDIS_URL
        with self._lock:
            if url not in self._clients:
                self._clients[url] = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1)
            return self._clients[url]

    def take(self, keys, limits, member) -> int:
        full = int(self.client().eval(_TAKE, len(keys), *keys, LEASE_SECONDS, member, *limits))
        if not full:
            with self._lock:
                self._held[member] = tuple(keys)
                if self._renewer is None or not self._renewer.is_alive():
                    self._renewer = threading.Thread(target=self._renew_forever, name="export-slot-leases", daemon=True)
                    self._renewer.start()
        return full

    def give_back(self, keys, member) -> None:
        with self._lock:
            self._held.pop(member, None)
            if not self._held:
                self._idle.set()
        with self.client().pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.zrem(key, member)
            pipe.execute()

    def renew(self) -> None:
        with self._lock:
            held = list(self._held.items())
        if held:
            keys = [key for _, ks in held for key in ks]
            members = [member for member, ks in held for _ in ks]
            self.client().eval(_RENEW, len(keys), *keys, LEASE_SECONDS, *members)

    def _renew_forever(self):
        while True:
            self._idle.wait(LEASE_SECONDS / 3)
            with self._lock:
                if not self._held:
                    self._renewer = None
                    return
                self._idle.clear()
            try:
                self.renew()
            except Exception as exc:  # noqa: BLE001 - Redis down: the leases may lapse; the thread goes on
                log.warning("export slots: leases not renewed (%s: %s)", type(exc).__name__, exc)


LOCAL = LocalSlots()
SHARED = RedisSlots()


class Slot:
    """One export's slots; give_back() may be called any number of times, from any thread."""

    def __init__(self, backend, keys):
        self.backend = backend
        self.keys = keys
        self.member = uuid.uuid4().hex
        self._given_back = False
        self._lock = threading.Lock()

    def give_back(self) -> None:
        with self._lock:
            if self._given_back:
                return
            self._given_back = True
        if self.backend is SHARED:
            done = REDIS.call(lambda: SHARED.give_back(self.keys, self.member), errors=(Exception,), fallback=False)
            if done is False:
                log.warning("export slots: a slot was not given back in Redis; its lease ends within %.0f s", LEASE_SECONDS)
        else:
            self.backend.give_back(self.keys, self.member)


def _token_key(request) -> str:
    token = getattr(request, "auth", None)
    if token is not None and getattr(token, "pk", None) is not None:
        return f"token:{type(token).__name__}:{token.pk}"
    return f"user:{request.user.pk}"


def take(request, project) -> Slot:
    """A slot of `project` and of the request's token, or ExportsBusy (429) naming the limit that is reached."""
    keys = [f"{PREFIX}project:{project.pk}", f"{PREFIX}{_token_key(request)}"]
    limits = [settings.EXPORT_MAX_CONCURRENT_PER_PROJECT, settings.EXPORT_MAX_CONCURRENT_PER_TOKEN]
    slot = Slot(SHARED if settings.REDIS_URL else LOCAL, keys)
    full = None
    if slot.backend is SHARED:
        full = REDIS.call(lambda: SHARED.take(keys, limits, slot.member), errors=(Exception,), fallback=None)
        if full is None:  # Redis unreachable: this process's own count still bounds what it serves
            slot.backend = LOCAL
    if full is None:
        full = LOCAL.take(keys, limits, slot.member)
    if full == 1:
        raise ExportsBusy(f"at most {limits[0]} exports of project {project.slug!r} stream at once "
                          f"(EXPORT_MAX_CONCURRENT_PER_PROJECT); retry when one has ended.")
    if full == 2:
        raise ExportsBusy(f"at most {limits[1]} exports stream at once with the same token or account "
                          f"(EXPORT_MAX_CONCURRENT_PER_TOKEN); retry when one has ended.")
    return slot


class _Held:
    """The response's content, giving back the slot when it ends or fails; Django calls close() when the response closes."""

    def __init__(self, content, slot: Slot):
        self.content = content
        self.slot = slot

    def close(self):
        self.slot.give_back()


class _HeldSync(_Held):
    def __iter__(self):
        return self

    def __next__(self):
        try:
            return next(self.content)
        except BaseException:  # the end (StopIteration) or a failure
            self.slot.give_back()
            raise


class _HeldAsync(_Held):
    def __aiter__(self):
        return self

    async def __anext__(self):
        try:
            return await anext(self.content)
        except BaseException:  # the end (StopAsyncIteration), a failure, or the request cancelled mid-read
            self.slot.give_back()
            raise


def held_while_streaming(response, slot: Slot):
    """The streamed `response`, giving back `slot` when its stream ends, fails, is closed, or is dropped unread.

    Over ASGI, when the client goes away Django cancels the response while it waits to send, and neither closes
    the response nor its content: the slot is given back when the content is collected (a finalizer).
    """
    content = response.streaming_content
    held = _HeldAsync(aiter(content), slot) if response.is_async else _HeldSync(iter(content), slot)
    weakref.finalize(held, slot.give_back)
    response.streaming_content = held
    return response
