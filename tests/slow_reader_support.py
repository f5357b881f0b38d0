"""Slow readers of an export, through the real server (uvicorn in this process), and an export large enough for them."""
import socket
import threading

from django.db import connection

from ingest.models import Event
from tests.browser import ConsoleServer

EVENTS = 6_000  # some 2.4 MB of export: far more than the sockets' buffers hold, so each reader's stream stays open


class SmallBuffersServer(ConsoleServer):
    """The console's server whose sockets keep a small send buffer (Linux lets one grow to 4 MiB, a whole test export).

    A slow reader of a real, large export holds its stream open however large the buffer; here a small export does.
    """

    def __init__(self):
        super().__init__()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16_384)  # accepted sockets inherit it
        self.sock.bind(("127.0.0.1", self.port))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __exit__(self, *exc):
        super().__exit__(*exc)
        self.sock.close()


def many_events(project, sender):
    """EVENTS events of one run of `project`, each line of the export some 400 bytes."""
    assert sender.post({"run": {"id": "big"}, "events": [
        {"step": 0, "component": "gpu0", "condition": "dead", "magnitude": 1.0, "time": 1_764_000_000.0}]}).status_code == 202
    first = Event.objects.get(run__run_id="big")
    Event.objects.bulk_create([
        Event(run=first.run, attempt=first.attempt, step=n, component=f"layers.{n}." + "w" * 200, condition="dead",
              magnitude=float(n), time=1_764_000_000.0 + n, receipt=first.receipt)
        for n in range(1, EVENTS)], batch_size=2_000)
    connection.close()


class SlowReader(threading.Thread):
    """GET the export with a small receive window, then a few bytes every half second until told to read the rest."""

    def __init__(self, port, path, token):
        super().__init__(daemon=True)
        self.request = (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
                        "Connection: close\r\n\r\n").encode()
        self.port = port
        self.read = bytearray()
        self.started_reading = threading.Event()
        self.hurry = threading.Event()
        self.ended_early = False
        self.error = None

    def run(self):
        try:
            with socket.socket() as sock:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                sock.settimeout(60)
                sock.connect(("127.0.0.1", self.port))
                sock.sendall(self.request)
                while not self.hurry.is_set():
                    data = sock.recv(64)
                    if not data:
                        self.ended_early = True
                        return
                    self.read += data
                    self.started_reading.set()
                    self.hurry.wait(0.5)
                while data := sock.recv(1 << 16):
                    self.read += data
        except Exception as exc:  # noqa: BLE001 - reported by the test
            self.error = exc
        finally:
            self.started_reading.set()

    def body(self) -> bytes:
        head, _, body = bytes(self.read).partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head
        # Chunked transfer encoding: size line, data, CRLF … the last chunk is empty.
        out, rest = bytearray(), body
        while True:
            size, _, rest = rest.partition(b"\r\n")
            n = int(size, 16)
            if n == 0:
                return bytes(out)
            out += rest[:n]
            rest = rest[n + 2:]
