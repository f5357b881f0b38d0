"""Support for the browser tests: the real ASGI console served by uvicorn in a thread, and Debian's Chromium.

The server runs in the test process (HTTP and websockets, the in-memory or Redis
channel layer, eager evaluation), so it sees the test database; tests using it
need committed data (`transactional_db`).
"""
import socket
import threading
import time
from pathlib import Path

import pytest
import uvicorn

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
SCREENSHOTS = Path(__file__).resolve().parent.parent / "var" / "screenshots"


class ConsoleServer:
    def __init__(self):
        from opsconsole.asgi import application

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        sock.close()
        # A websocket consumer on the Redis channel layer is at times still cancelling in channels_redis' receive
        # long after its socket closed; uvicorn's graceful shutdown would wait for it forever (and __exit__ give up
        # after 10 s with the server thread still running). After 2 s uvicorn cancels it again, which ends it.
        config = uvicorn.Config(application, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off",
                                ws="websockets-sansio", timeout_graceful_shutdown=2)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self):
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture
def console_server(transactional_db, settings):
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
    settings.DEBUG = False
    with ConsoleServer() as server:
        yield server


@pytest.fixture
def browser(monkeypatch):
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; the test's own ORM calls are
    # still synchronous and alone on their connection (Django's documented escape hatch).
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def log_in(browser, server, username, password):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(server.url + "/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(server.url + "/")
    return page


def screenshot(page, name):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
