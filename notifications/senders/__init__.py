"""The senders, one module per channel kind (`notifications/senders/<kind>.py`), each with

    send(target: ChannelTarget, message: IncidentMessage) -> DeliveryOutcome

looked up by kind and imported when first used. A sender never raises for a failed delivery: it answers with
an outcome (`retry` for what may pass: 5xx, 429, timeouts, refused connections), which the delivery task logs.

Every HTTP kind sends through `post`, the one outbound request of the console's notifications (the test message
too): no redirect is followed, one deadline covers the whole try, only allowed destinations are reached
(notifications/destinations.py), and what it reports is a status and a fixed reason, never the receiver's words
nor an exception's text (which can quote a header, and so a secret).
"""
import http.client
import importlib
import io
import json
import logging
import socket
import ssl
import threading
import time
from urllib.parse import urljoin, urlsplit

from ingest.wire import wire_value
from notifications import destinations
from notifications.message import ChannelTarget, DeliveryOutcome, IncidentMessage

log = logging.getLogger(__name__)

USER_AGENT = "WarningLight-Notifier/1"


def sender_for(kind: str):
    """The `send` function of the kind's module (ImportError for a kind that has none)."""
    return importlib.import_module(f"notifications.senders.{kind}").send


def send(target: ChannelTarget, message: IncidentMessage) -> DeliveryOutcome:
    try:
        return sender_for(target.kind)(target, message)
    except Exception as exc:  # a sender's own bug is a failed delivery, never an error in the caller
        # Its text stays in the server's log: it may quote the channel's secret, and the delivery log is read by
        # every member of the project and by its ingest token.
        log.exception("notifications: the %s sender failed", target.kind)
        return DeliveryOutcome(ok=False, retry=False, detail=f"the {target.kind} sender failed ({type(exc).__name__})")


def short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def finite(value):
    """A magnitude in the API's wire form: non-finite ones as "NaN", "Infinity", "-Infinity"; None stays None."""
    return wire_value(value) if isinstance(value, float) else value


def message_json(message: IncidentMessage) -> dict:
    data = message.as_json()
    data["magnitude"] = finite(data["magnitude"])
    return data


def json_bytes(body) -> bytes:
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


MAX_ANSWER_BYTES = 64 * 1024  # status line, headers and body: more is never read
DEFAULT_PORTS = {"http": 80, "https": 443}


def tls_context() -> ssl.SSLContext:
    """The system's trusted CAs, host names checked (a test trusts its own CA by replacing this)."""
    return ssl.create_default_context()


def post(url: str, body: bytes, *, timeout: float, headers: dict | None = None) -> DeliveryOutcome:
    """POST a body; 2xx is ok, 5xx/429/timeouts/unreachable are worth a retry, any other answer fails at once.

    One deadline, `timeout` seconds, covers resolving, connecting, sending and the whole answer, of which at most
    MAX_ANSWER_BYTES are read; a 3xx is a failure naming its Location (a redirect is never followed: it would take
    the credentials to another host, and turn the POST into a GET that a proxy answers "200").
    """
    try:
        return _post(url, body, timeout, headers or {})
    except Exception:  # a bug here must not become exception text in the delivery log
        log.exception("notifications: POST to a channel failed unexpectedly")
        return DeliveryOutcome(ok=False, detail="the request failed in the console (see the server's log)")


def _post(url, body, timeout, headers) -> DeliveryOutcome:
    too_slow = DeliveryOutcome(ok=False, retry=True, detail=f"no answer within {timeout:g} s")
    if any(ord(c) < 32 or ord(c) == 127 for c in url):
        return DeliveryOutcome(ok=False, detail="the URL has control characters")
    try:
        parts = urlsplit(url)
        port = parts.port or DEFAULT_PORTS.get(parts.scheme)
    except ValueError:
        return DeliveryOutcome(ok=False, detail="not a valid URL (its port?)")
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        return DeliveryOutcome(ok=False, detail="only http(s) URLs are sent to")
    deadline = Deadline(timeout)
    try:
        try:
            addresses = destinations.resolve(parts.hostname, port, deadline.left())
        except TimeoutError:
            return too_slow
        except OSError:
            return DeliveryOutcome(ok=False, retry=True, detail="unreachable: the host name does not resolve")
        if why := destinations.refusal_of(addresses):
            return DeliveryOutcome(ok=False, detail=f"destination not allowed: {why}")
        connection_class = _PinnedHTTPS if parts.scheme == "https" else _PinnedHTTP
        extra = {"context": tls_context()} if parts.scheme == "https" else {}
        connection = connection_class(parts.hostname, port, addresses=addresses, deadline=deadline,
                                      timeout=deadline.left(), **extra)
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        try:
            connection.request("POST", path, body=body, headers={
                "Content-Type": "application/json", "User-Agent": USER_AGENT, **headers})
            response = connection.getresponse()
            status, location = response.status, response.getheader("Location")
            _drain(response)
        except Exception as exc:
            if deadline.passed:
                return too_slow
            return _failure(exc, too_slow)
        finally:
            connection.close()
    finally:
        deadline.end()
    if 200 <= status < 300:
        return DeliveryOutcome(ok=True, status_code=status)
    if 300 <= status < 400:
        return DeliveryOutcome(ok=False, status_code=status, detail=short(
            f"HTTP {status}: redirect to {_shown(url, location)} refused (redirects are not followed: "
            "point the channel at the final URL)"))
    return DeliveryOutcome(ok=False, retry=status >= 500 or status == 429, status_code=status, detail=f"HTTP {status}")


def _failure(exc, too_slow) -> DeliveryOutcome:
    """A fixed reason for what went wrong: exception texts can quote a header value, and so the secret."""
    if isinstance(exc, TimeoutError):  # socket.timeout included
        return too_slow
    if isinstance(exc, AnswerTooLong):
        return DeliveryOutcome(ok=False, detail=f"the answer was longer than {MAX_ANSWER_BYTES // 1024} KiB")
    if isinstance(exc, ConnectionRefusedError):
        return DeliveryOutcome(ok=False, retry=True, detail="unreachable: connection refused")
    if isinstance(exc, ssl.SSLCertVerificationError):
        return DeliveryOutcome(ok=False, retry=True, detail="TLS: the server's certificate was not accepted")
    if isinstance(exc, ssl.SSLError):
        return DeliveryOutcome(ok=False, retry=True, detail="TLS: the connection could not be secured")
    if isinstance(exc, (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)):
        return DeliveryOutcome(ok=False, retry=True, detail="the connection was closed without an answer")
    if isinstance(exc, http.client.HTTPException):
        return DeliveryOutcome(ok=False, retry=True, detail="the answer was not valid HTTP")
    if isinstance(exc, OSError):
        return DeliveryOutcome(ok=False, retry=True, detail="unreachable")
    if isinstance(exc, ValueError):  # http.client refusing a header value: a secret with a newline, say
        return DeliveryOutcome(ok=False, detail="a header could not be sent (the channel's secret has characters "
                                                "a header cannot carry)")
    raise exc


def _shown(url: str, location: str | None) -> str:
    """A redirect's target as the admin needs it to fix the URL: scheme, host and path, printable, bounded."""
    if not location:
        return "(no Location)"
    try:
        target = urlsplit(urljoin(url, location.strip()))
        host = target.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        port = target.port
    except ValueError:
        return "(an invalid Location)"
    where = f"{target.scheme}://{host}{f':{port}' if port else ''}{target.path}"
    where = "".join(c for c in where if c.isprintable())
    return where if len(where) <= 150 else where[:149] + "…"


def _drain(response):
    """Read what is left of the answer (it never decides the outcome; read so the receiver sees a clean close)."""
    try:
        while response.read(8192):
            pass
    except Exception:  # cut off at the cap or the deadline, or a broken body: the status stands
        pass
    finally:
        response.close()


class AnswerTooLong(Exception):
    pass


class Deadline:
    """One deadline for a whole try: at it, every socket of the try is shut down, ending any read or write.

    A socket timeout bounds each read, not the try: a receiver sending one byte a second would hold a worker for
    as long as it liked. Shutting the socket down from a timer ends a read blocked anywhere, TLS handshake
    included; the shutdown goes through a duplicate of the socket's descriptor, which stays valid whatever
    object wraps the socket later (ssl detaches the original).
    """

    def __init__(self, seconds: float):
        self.at = time.monotonic() + seconds
        self.passed = False
        self._lock = threading.Lock()
        self._over = False
        self._guards = []
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def left(self) -> float:
        return max(0.0, self.at - time.monotonic())

    def guard(self, sock: socket.socket):
        with self._lock:
            if self.passed:
                raise TimeoutError("the deadline passed")
            self._guards.append(sock.dup())

    def _expire(self):
        with self._lock:
            if self._over:
                return
            self.passed = True
            for guard in self._guards:
                try:
                    guard.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def end(self):
        self._timer.cancel()
        with self._lock:
            self._over = True
            for guard in self._guards:
                guard.close()
            self._guards.clear()


class _CappedReader(io.RawIOBase):
    """The socket's bytes up to MAX_ANSWER_BYTES; past them, AnswerTooLong."""

    def __init__(self, raw):
        self.raw = raw
        self.left = MAX_ANSWER_BYTES

    def readable(self):
        return True

    def readinto(self, buffer):
        if self.left <= 0:
            raise AnswerTooLong()
        view = memoryview(buffer)[: self.left]
        n = self.raw.readinto(view)
        self.left -= n or 0
        return n

    def close(self):
        self.raw.close()
        super().close()


class _CappedResponse(http.client.HTTPResponse):
    def __init__(self, sock, *args, **kwargs):
        super().__init__(sock, *args, **kwargs)
        self.fp.close()  # the buffered reader http.client made: replaced by one that stops at the cap
        self.fp = io.BufferedReader(_CappedReader(sock.makefile("rb", buffering=0)))


class _Pinned:
    """Connects to an address the destination check passed, never to a fresh DNS answer.

    http.client still names the host: the Host header, and for https the SNI and the certificate's name check.
    """

    response_class = _CappedResponse

    def __init__(self, host, port, *, addresses, deadline: Deadline, **kwargs):
        super().__init__(host, port, **kwargs)
        self._addresses = addresses
        self._deadline = deadline
        self._create_connection = self._connect_checked

    def _connect_checked(self, _address, timeout=None, source_address=None):
        error = None
        for family, sockaddr in self._addresses:
            sock = socket.socket(family, socket.SOCK_STREAM)
            try:
                self._deadline.guard(sock)
                sock.settimeout(max(self._deadline.left(), 0.01))  # 0 would make the socket non-blocking
                sock.connect(sockaddr)
                return sock
            except OSError as exc:
                sock.close()
                error = exc
                if self._deadline.passed or isinstance(exc, TimeoutError):
                    break
        raise error


class _PinnedHTTP(_Pinned, http.client.HTTPConnection):
    pass


class _PinnedHTTPS(_Pinned, http.client.HTTPSConnection):
    pass
