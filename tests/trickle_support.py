"""A receiver that answers as slowly as it can without going quiet: one byte of its answer every `interval` seconds.

A client whose timeout is per socket read never times out on it. It keeps, per connection, when the request came
in and when the client went away (closed or reset the connection), so a test can tell whether two tries of one
message ever overlapped.
"""
import select
import socket
import threading
import time

ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


class Connection:
    def __init__(self):
        self.request = b""
        self.opened = time.monotonic()
        self.closed = None  # when the client went away, or the receiver stopped

    @property
    def open(self):
        return self.closed is None


class TricklingReceiver:
    def __init__(self, interval=2.0):
        self.interval = interval
        self.connections: list[Connection] = []
        self.stopping = threading.Event()
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}/hook"
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def _accept(self):
        while not self.stopping.is_set():
            try:
                sock, _ = self.server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            connection = Connection()
            self.connections.append(connection)
            thread = threading.Thread(target=self._serve, args=(sock, connection), daemon=True)
            self.threads.append(thread)
            thread.start()

    def _serve(self, sock, connection):
        try:
            sock.settimeout(10)
            while b"\r\n\r\n" not in connection.request:
                chunk = sock.recv(65536)
                if not chunk:
                    return
                connection.request += chunk
            head, _, body = connection.request.partition(b"\r\n\r\n")
            length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            while len(body) < length:
                chunk = sock.recv(65536)
                if not chunk:
                    return
                body += chunk
            connection.request = head + b"\r\n\r\n" + body
            for byte in ANSWER:
                if not self._wait(sock):
                    return
                sock.sendall(bytes([byte]))
        except OSError:  # the client went away: closed, reset, or its process killed
            return
        finally:
            connection.closed = time.monotonic()
            sock.close()

    def _wait(self, sock) -> bool:
        """One interval, watching the client: False as soon as it goes away (or the receiver stops)."""
        deadline = time.monotonic() + self.interval
        while (left := deadline - time.monotonic()) > 0:
            if self.stopping.is_set():
                return False
            readable, _, _ = select.select([sock], [], [], min(0.1, left))
            if readable and not sock.recv(65536):
                return False
        return True

    def in_flight(self):
        return sum(c.open for c in self.connections)

    def overlapping(self):
        """Pairs of connections that were open at the same time."""
        spans = [(c.opened, c.closed or float("inf")) for c in self.connections]
        return [(a, b) for i, a in enumerate(spans) for b in spans[i + 1:] if a[0] < b[1] and b[0] < a[1]]

    def close(self):
        self.stopping.set()
        self.server.close()
        for thread in self.threads:
            thread.join(timeout=5)
