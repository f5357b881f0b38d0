"""The console's ASGI handler: a request crosses from the event loop to a thread once, and back once.

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
"""
from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIHandler


class OneHopASGIHandler(ASGIHandler):
    def load_middleware(self, is_async=False):
        super().load_middleware(is_async=False)
        # thread_sensitive: the request's thread (Django gives each request one), where its connections live.
        self._middleware_chain = sync_to_async(self._middleware_chain, thread_sensitive=True)
