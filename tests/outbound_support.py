"""Hostile receivers for the outbound-request tests, real servers on loopback in threads.

- `Trickle`: reads a request, sends `head` at once, then answers one byte every `every` seconds for `for_seconds` (a receiver that
  keeps a connection alive without ever finishing its answer); `closed_after` says how long each connection
  lasted before the client gave up.
- `Recorder`: records every request, whatever its method (a redirect followed by urllib turns a POST into a GET).
- `Redirecting`: answers every request with `status` and `Location: location`.
"""
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def read_request(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


class Trickle:
    def __init__(self, every=0.5, for_seconds=30.0, answer=b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"x" * 1000,
                 head=b""):
        self.every, self.for_seconds, self.answer, self.head = every, for_seconds, answer, head
        self.closed_after = []
        self.requests = []
        self._stop = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn):
        started = time.monotonic()
        with conn:
            self.requests.append(read_request(conn))
            try:
                conn.sendall(self.head)  # what comes at once, before the trickle
            except OSError:
                self.closed_after.append(time.monotonic() - started)
                return
            for i in range(len(self.answer)):
                if time.monotonic() - started > self.for_seconds or self._stop.wait(self.every):
                    break
                try:
                    conn.sendall(self.answer[i:i + 1])
                except OSError:  # the client closed: the try is over
                    break
            self.closed_after.append(time.monotonic() - started)

    def close(self):
        self._stop.set()
        self.listener.close()


class Recorder:
    def __init__(self):
        self.requests = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _record(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                outer.requests.append({"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body})
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            do_GET = do_POST = do_PUT = do_HEAD = _record

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Redirecting(Recorder):
    def __init__(self, location, status=302):
        super().__init__()
        outer = self
        outer.location, outer.status = location, status
        base = self.server.RequestHandlerClass

        class Handler(base):
            def _record(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                outer.requests.append({"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body})
                self.send_response(outer.status)
                self.send_header("Location", outer.location)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST = do_PUT = do_HEAD = _record

        self.server.RequestHandlerClass = Handler
