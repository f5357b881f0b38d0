"""The console's ASGI handler: a request crosses from the event loop to a thread once, and back once,
and that thread is one kept from an earlier request.

Django's own ASGIHandler builds its middleware chain for an async view. The
console's views (DRF's above all) and most of its middleware, Django's
included, are synchronous, so each request went loop → thread for the
middleware, back to the loop under the last of them for the view middleware,
to a thread again for each `process_view`, for the view and for rendering
its response: some dozen hand-overs between the event loop and a thread,
measured at several ms of a 5,000-point ingest batch (docs/benchmarks.md).
Here the chain is Django's synchronous one (what WSGI runs, what the tests
run), called in one `sync_to_async` on the request's own thread; reading the
body, sending the response and streaming stay on the event loop as before.

Django gives each request a thread of its own (asgiref's ThreadSensitiveContext): a new thread, and a second
one to join it, every request, and every per-thread cache (Celery's producer and result backend among them)
built again. A request here takes an idle single-thread executor instead, and gives it back when it ends:
still one thread for all of a request's synchronous code and no two requests on one thread at a time, as a
threaded WSGI server does. A thread still busy when its request ends (a client that went away mid-request
leaves the view running), or whose request was cut off by an error, is not given back: it is shut down once
its work is done, as Django would.
"""
import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.core.handlers.asgi import ASGIHandler

# Idle threads kept for the next requests; a burst beyond it gets new ones, shut down after.
IDLE_THREADS = 16


class _RequestThread(ThreadPoolExecutor):
    """One thread, which knows whether anything submitted to it is still queued or running."""

    def __init__(self):
        super().__init__(max_workers=1, thread_name_prefix="request")
        self._unfinished = 0
        self._count_lock = threading.Lock()

    def submit(self, fn, /, *args, **kwargs):
        with self._count_lock:
            self._unfinished += 1
        # Added before the caller's own callbacks (asyncio's wrap_future), so the count drops before the loop hears.
        future = super().submit(fn, *args, **kwargs)
        future.add_done_callback(self._finished)
        return future

    def _finished(self, _future):
        with self._count_lock:
            self._unfinished -= 1

    @property
    def idle(self) -> bool:
        with self._count_lock:
            return self._unfinished == 0


class OneHopASGIHandler(ASGIHandler):
    def __init__(self):
        super().__init__()
        self._idle = []  # only touched on the event loop's thread

    def load_middleware(self, is_async=False):
        super().load_middleware(is_async=False)
        # thread_sensitive: the request's thread, where its connections live.
        self._middleware_chain = sync_to_async(self._middleware_chain, thread_sensitive=True)

    async def send_response(self, response, send):
        # A response may ask to be held back (ingest yielding to evaluation, ingest/pacing.py): waited here,
        # on the event loop, where it holds no thread.
        hold = getattr(response, "hold_seconds", 0)
        if hold > 0:
            await asyncio.sleep(hold)
        await super().send_response(response, send)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        executor = self._idle.pop() if self._idle else _RequestThread()
        ended = False
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self.handle(scope, receive, send)
            ended = True
        finally:
            # Kept only after a request that ended as requests do: one cut off (an error, the server stopping)
            # may have left a database connection open on the thread, which goes with the thread instead.
            if ended and executor.idle and len(self._idle) < IDLE_THREADS:
                self._idle.append(executor)
            else:
                # Not on the loop: the thread may be running still (a disconnect), and shutdown waits for it.
                threading.Thread(target=executor.shutdown, daemon=True).start()
