"""Off the training thread: batching, HTTP with retries, the spool file.

The training thread only appends tuples to a bounded deque (`Sender.queue`).
One daemon thread takes them out, checks and encodes them (wire.Encoder),
and posts NDJSON requests of one run to `POST /api/v1/ingest`:

* a request holds at most `batch_points` items (and at most 10,000 points and
  events, and about 3 MiB), always starting with the run line; it leaves every
  `flush_seconds`, or as soon as a full batch is waiting;
* each request carries `X-Batch-Id: <run id>:<process uuid>:<seq>`; a
  connection error, a timeout, a 5xx, 408 or 429 re-sends the same bytes with
  the same batch id (exponential backoff or the response's Retry-After, `retries` times: a console whose
  database is restarting answers 503 with Retry-After), so the console
  stores it once however many tries reach it;
* at close() a 503 or 429 (the console asks to be tried again: its database is restarting, or it is
  throttling) is still tried again after its Retry-After, as long as the next try can end (its `timeout`)
  before close()'s deadline; any other failure at close() is spooled at once (an unreachable console is
  not waited for);
* a batch that still fails is appended to the spool file and the console is
  marked down: while it is down, batches go straight to the spool and one batch
  every `probe_seconds` (doubling up to 60 s) is tried first; the first one that
  gets through marks it up again, so a console that comes back gets the rest;
* a 4xx other than 408/429 is not retried: it is logged with the console's
  error paths; 400/422 (the content was refused) go to `<name>.rejected.ndjson`
  beside the spool, every other one (401 wrong token, 403, 404 wrong url, 413)
  to the spool itself, whose content is valid and can be imported later.
"""
from __future__ import annotations

import collections
import hashlib
import http.client
import json
import logging
import os
import ssl
import threading
import time
import urllib.parse
import uuid
from pathlib import Path

from . import wire
from .steps import SentSteps

log = logging.getLogger("warninglight")

POINT, PHASE, EVENT, RESET = 0, 1, 2, 3  # RESET: a restart on a rank that sends no phases
RETRYABLE_STATUS = {408, 429}
# Answers that ask to be tried again later (with Retry-After): still retried while close() has time left.
RETRIED_AT_CLOSE = {429, 503}
PROBE_MAX_SECONDS = 60.0
BACKOFF_MAX_SECONDS = 30.0


class Transport:
    """One keep-alive HTTP(S) connection to the console."""

    def __init__(self, url: str, token: str | None, timeout: float):
        parts = urllib.parse.urlsplit(url if "://" in url else "http://" + url)
        if parts.scheme not in ("http", "https"):
            raise ValueError(f"url must start with http:// or https://, got {url!r}")
        self.scheme = parts.scheme
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port
        self.path = parts.path.rstrip("/") + "/api/v1/ingest"
        self.timeout = timeout
        self.headers = {"Content-Type": "application/x-ndjson", "User-Agent": "warninglight-client/0.1", "Accept": "application/json"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self.conn = None
        self.last_reused = False

    def _connection(self):
        if self.conn is None:
            if self.scheme == "https":
                self.conn = http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout, context=ssl.create_default_context())
            else:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        return self.conn

    def post(self, body: bytes, batch_id: str):
        """(status, body bytes, Retry-After header); `last_reused` tells whether a kept-alive
        connection was reused. Raises OSError / http.client.HTTPException when no response came back.
        """
        self.last_reused = self.conn is not None
        conn = self._connection()
        try:
            conn.request("POST", self.path, body=body, headers={**self.headers, "X-Batch-Id": batch_id})
            response = conn.getresponse()
            data = response.read()
        except BaseException:
            self.close()
            raise
        if response.will_close:
            self.close()
        return response.status, data, response.getheader("Retry-After")

    def close(self):
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:
                pass
            self.conn = None


class SpoolFile:
    """Appends whole batches to `<dir>/<name>[.n].ndjson`, the run line once at the file's start.

    A file is reused only when its first line is this run's run line (same
    identity); otherwise the next free `<name>.2.ndjson`, `<name>.3.ndjson`… is
    used, so every file holds exactly one run line and imports as it is.
    """

    def __init__(self, directory: Path, base: str, suffix: str, run_line: str):
        self.directory = directory
        self.base = base
        self.suffix = suffix
        self.head = run_line.encode()
        self.path = None
        self.lock = threading.Lock()

    def _choose(self) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        for n in range(1, 10_000):
            path = self.directory / (f"{self.base}{self.suffix}" if n == 1 else f"{self.base}.{n}{self.suffix}")
            try:
                with path.open("rb") as fh:
                    first = fh.readline().rstrip(b"\r\n")
            except FileNotFoundError:
                return path
            if not first or first == self.head:
                return path
        raise OSError(f"no free spool file name for {self.base} in {self.directory}")

    def write(self, lines: list[str]) -> Path:
        with self.lock:
            if self.path is None:
                self.path = self._choose()
            data = "\n".join(lines).encode() + b"\n"
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                if os.fstat(fd).st_size == 0:
                    data = self.head + b"\n" + data
                view = memoryview(data)
                while view:
                    written = os.write(fd, view)  # one append per batch: no torn lines between batches
                    view = view[written:]
            finally:
                os.close(fd)
            return self.path


class Sender:
    """The queue and the daemon thread that empties it."""

    def __init__(self, run: dict, *, url, token, spool_dir, batch_points, flush_seconds, max_queue, timeout,
                 retries=5, backoff=0.5, probe_seconds=5.0, spool_name=None):
        self.run_id = run["id"]
        self.full_run_line = wire.run_line(run)
        self.bare_run_line = wire.run_line({"id": self.run_id})
        self.identity_acknowledged = False
        self.encoder = wire.Encoder(self.run_id)
        self.sent_steps = SentSteps()  # a step a series re-sends is a restart to the console
        self.batch_points = max(1, min(int(batch_points), wire.MAX_ITEMS))
        self.flush_seconds = max(0.01, float(flush_seconds))
        self.max_queue = max(1, int(max_queue))
        self.queue = collections.deque(maxlen=self.max_queue)
        # Send early when a full batch waits, or when the queue is half full (so a small max_queue still drains).
        self.send_threshold = max(1, min(self.batch_points, self.max_queue // 2))
        self.retries = max(0, int(retries))
        self.backoff = max(0.0, float(backoff))
        self.probe_seconds = max(0.01, float(probe_seconds))
        self.transport = None
        if url:
            try:
                self.transport = Transport(url, token, timeout)
            except ValueError as exc:
                log.warning("warninglight: %s; telemetry is spooled instead", exc)

        directory = Path(spool_dir) if spool_dir else Path("warninglight-spool")
        directory = directory.resolve()
        base = spool_name or self.run_id.replace("/", "_")
        self.spool = SpoolFile(directory, base, ".ndjson", self.full_run_line)
        self.rejected_spool = SpoolFile(directory, base, ".rejected.ndjson", self.full_run_line)

        process = uuid.uuid4().hex
        prefix = self.run_id if len(self.run_id) <= 80 else hashlib.sha256(self.run_id.encode()).hexdigest()[:24]
        self.batch_prefix = f"{prefix}:{process}"
        self.seq = 0

        # Counters. `enqueued` is written by the training thread(s) only, `taken` by this thread only.
        self.enqueued = 0
        self.taken = 0
        self.finished = 0  # items whose batch is done (sent, spooled, rejected or lost)
        self.counts = collections.Counter()
        self.warned = set()
        self.actions = []
        self._action_keys = set()
        self.should_stop = False

        self.down = False
        self.next_probe = 0.0
        self.probe_interval = self.probe_seconds
        self.carry = None  # an encoded line that did not fit the previous request
        self.last_flush = time.monotonic()
        self.flush_requested = 0
        self.closing = threading.Event()
        self.close_deadline = None  # time.monotonic() by which stop() gives up waiting for the thread
        self.wake = threading.Event()
        self.progress = threading.Condition()
        self.thread = threading.Thread(target=self._run, name=f"warninglight-sender[{self.run_id}]", daemon=True)

    # ---- counters -----------------------------------------------------------------------------
    def dropped(self) -> int:
        return max(0, self.enqueued - self.taken - len(self.queue))

    def warn_once(self, kind: str, message: str, *args, level=logging.WARNING):
        if kind in self.warned:
            return
        self.warned.add(kind)
        log.log(level, "warninglight: " + message, *args)

    def _repeated(self, step, metric, component, same_value):
        self.counts["repeated_steps"] += 1
        if same_value:  # the same value again (a framework re-logging `epoch` with its eval logs): nothing to say
            return
        self.warn_once("repeated", "step %s of %s was logged again in this process with another value; the repeat is not sent (the console would "
                       "take a re-sent step for a restart) and further repeats are counted in stats['repeated_steps']. A job "
                       "that went back to a checkpoint calls wl.restart(step) before logging its steps again",
                       step, metric if component is None else f"{metric}@{component}")

    def reject(self, kind: str, message: str):
        self.counts["rejected"] += 1
        self.warn_once("rejected:" + kind, "%s (item dropped; further %s problems are counted in stats['rejected'], not logged)", message, kind)

    # ---- thread ------------------------------------------------------------------------------
    def start(self):
        self.thread.start()

    def _poll_interval(self):
        return min(0.05, self.flush_seconds)

    def _run(self):
        while True:
            try:
                closing = self.closing.is_set()
                due = time.monotonic() - self.last_flush >= self.flush_seconds
                if self.queue or self.carry:
                    if closing or due or self.flush_requested or len(self.queue) >= self.send_threshold:
                        self._send_available(closing)
                        self.flush_requested = 0
                else:
                    self.last_flush = time.monotonic()
                    if self.flush_requested:
                        self.flush_requested = 0
                    with self.progress:
                        self.progress.notify_all()
                if closing and not self.queue and not self.carry:
                    break
                if not closing:
                    self.wake.wait(self._poll_interval())
                    self.wake.clear()
            except Exception:  # never die silently: the queue would only fill
                log.exception("warninglight: sender error (continuing)")
                time.sleep(0.1)
        if self.transport is not None:
            self.transport.close()
        with self.progress:
            self.progress.notify_all()

    def _send_available(self, closing):
        """Send everything queued now, batch after batch (stops early only if new items keep coming)."""
        for _ in range(1000):
            lines, items = self._take_batch()
            if lines:
                self._deliver(lines, items)
            elif items:
                self._finish(items)
            if not (self.queue or self.carry) or (len(self.queue) < self.send_threshold and not closing and not self.flush_requested):
                break
        self.last_flush = time.monotonic()

    def _take_batch(self):
        lines, size, items, points_events = [], 0, 0, 0
        limit = self.batch_points
        encoder = self.encoder
        if self.carry is not None:
            line, counted = self.carry
            self.carry = None
            lines.append(line)
            size += len(line) + 1
            items += 1
            points_events += counted
        popleft = self.queue.popleft
        while len(lines) < limit:
            try:
                item = popleft()
            except IndexError:
                break
            self.taken += 1
            kind = item[0]
            try:
                if kind == POINT:
                    step = wire.as_step(item[1])
                    token = wire.value_token(wire.as_float(item[4]))
                    line = encoder.point_token(step, item[2], item[3], token, item[5])
                    repeat = self.sent_steps.add(item[2], item[3], step, token)
                    if repeat is not None:
                        items += 1
                        self._repeated(step, item[2], item[3], same_value=repeat)
                        continue
                elif kind == RESET:
                    self.sent_steps.restart()
                    items += 1
                    continue
                elif kind == PHASE:
                    line = encoder.phase(item[1], item[2], item[3])
                    if item[2] == "restart":  # declared by the job: the steps from here on are a new attempt
                        self.sent_steps.restart()
                else:
                    line = encoder.event(item[1], item[2], item[3], item[4], item[5], item[6])
            except wire.Rejected as exc:
                items += 1
                self.reject(exc.kind, str(exc))
                continue
            except Exception as exc:  # anything a strange value does while converting
                items += 1
                self.reject("value", f"could not encode an item: {exc!r}")
                continue
            counted = kind != PHASE
            if size + len(line) + 1 > wire.BODY_TARGET_BYTES or points_events + counted > wire.MAX_ITEMS:
                if lines:
                    self.carry = (line, counted)
                    break
            lines.append(line)
            size += len(line) + 1
            items += 1
            points_events += counted
        return lines, items

    def _finish(self, items):
        with self.progress:
            self.finished += items
            self.progress.notify_all()

    # ---- delivery ----------------------------------------------------------------------------
    def _deliver(self, lines, items):
        try:
            self._deliver_lines(lines)
        finally:
            self._finish(items)

    def _deliver_lines(self, lines):
        self.seq += 1
        batch_id = f"{self.batch_prefix}:{self.seq}"
        if self.transport is None:
            self._spool(lines)
            return
        closing = self.closing.is_set()
        if self.down and (closing or time.monotonic() < self.next_probe):
            self._spool(lines)
            return
        head = self.bare_run_line if self.identity_acknowledged else self.full_run_line
        body = (head + "\n" + "\n".join(lines) + "\n").encode()
        attempts = 1 if self.down else self.retries + 1
        delay = self.backoff
        attempt = 0
        free_retry = True  # a kept-alive connection the server closed meanwhile: retry at once, uncounted
        while True:
            error = None
            try:
                status, data, retry_after = self.transport.post(body, batch_id)
            except (OSError, http.client.HTTPException) as exc:
                error = exc
                status, data, retry_after = None, b"", None
            if error is None:
                if 200 <= status < 300:
                    self._accepted(data)
                    return
                if status not in RETRYABLE_STATUS and status < 500:
                    self._refused(status, data, lines, batch_id)
                    return
            elif self.transport.last_reused and free_retry:
                free_retry = False
                continue
            attempt += 1
            if attempt >= attempts:
                break
            wait = delay
            if retry_after:
                try:
                    wait = max(wait, min(float(retry_after), BACKOFF_MAX_SECONDS))
                except ValueError:
                    pass
            delay = min(delay * 2 if delay else 0, BACKOFF_MAX_SECONDS)
            if not self._wait_to_retry(wait, status):
                break
            self.counts["retries"] += 1
        # Unreachable (or still failing): keep the batch on disk, go on with the next ones.
        reason = f"HTTP {status}" if error is None else f"{type(error).__name__}: {error}"
        was_down = self.down
        self.down = True
        self.probe_interval = min(self.probe_interval * 2, PROBE_MAX_SECONDS) if was_down else self.probe_seconds
        self.next_probe = time.monotonic() + self.probe_interval
        path = self._spool(lines)
        if not was_down:
            log.warning("warninglight: console %s unreachable (%s); batches are spooled to %s and the console is retried "
                        "every %.0f s or more", self.transport.host, reason, path, self.probe_interval)

    def _wait_to_retry(self, wait, status) -> bool:
        """Wait `wait` seconds before the batch's next try; False when there is to be none.

        Once close() is called (before or during the wait), only a 503 or 429 is tried again: the console asked
        for it, and a job that ends while its database restarts should not leave its last batch in the spool.
        Then the try must end by close()'s deadline, its `timeout` included: a request still running when
        stop() gives up is neither sent nor spooled if the process exits.
        """
        retry_at = time.monotonic() + wait
        if not self.closing.is_set() and not self.closing.wait(wait):
            return True
        if status not in RETRIED_AT_CLOSE:
            return False
        deadline = self.close_deadline
        if deadline is not None and retry_at + self.transport.timeout > deadline:
            return False
        time.sleep(max(0.0, retry_at - time.monotonic()))
        return True

    def _accepted(self, data):
        if self.down:
            log.warning("warninglight: console reachable again; sending, no longer spooling")
        self.down = False
        self.probe_interval = self.probe_seconds
        self.identity_acknowledged = True
        self.counts["requests"] += 1
        try:
            payload = json.loads(data) if data else {}
        except ValueError:
            payload = {}
        if not isinstance(payload, dict):
            payload = {}
        accepted = payload.get("accepted") or {}
        if payload.get("duplicate"):
            self.counts["duplicates"] += 1
        if isinstance(accepted, dict):
            for key in ("points", "events", "phases"):
                value = accepted.get(key)
                if isinstance(value, int):
                    self.counts["sent_" + key] += value
        actions = payload.get("actions") or []
        if isinstance(actions, list):
            for action in actions:
                self._action(action)

    def _action(self, action):
        if not isinstance(action, dict):
            return
        try:
            key = json.dumps(action, sort_keys=True)
        except (TypeError, ValueError):
            key = repr(action)
        if key in self._action_keys:
            return
        self._action_keys.add(key)
        self.actions.append(action)
        if action.get("action") == "stop":
            self.should_stop = True
            log.warning("warninglight: the console asks this job to stop (alert %s, rule %s); wl.should_stop is now True — "
                        "the client itself does nothing", action.get("alert"), action.get("rule"))

    def _refused(self, status, data, lines, batch_id):
        errors = []
        try:
            payload = json.loads(data)
            errors = [f"{e.get('path')}: {e.get('message')}" for e in payload.get("errors", [])][:5]
        except Exception:
            errors = [data[:200].decode("utf-8", "replace")] if data else []
        detail = "; ".join(errors) or "(no detail)"
        if status in (400, 422):
            path = self._spool(lines, self.rejected_spool)
            self.counts["refused"] += len(lines)
            log.error("warninglight: console refused batch %s (HTTP %s): %s — kept in %s", batch_id, status, detail, path)
        else:
            path = self._spool(lines)
            hint = {401: "is the token right?", 403: "does this run id belong to another project?", 404: "is the url right?"}.get(status, "")
            self.warn_once(f"http{status}", "console answered HTTP %s to batch %s: %s %s — batches are spooled to %s (import them later "
                           "with manage.py import_jsonl)", status, batch_id, detail, hint, path, level=logging.ERROR)

    def _spool(self, lines, spool=None):
        spool = spool or self.spool
        try:
            path = spool.write(lines)
        except OSError as exc:
            self.counts["lost"] += len(lines)
            self.warn_once("spool", "cannot write the spool file in %s (%s); telemetry that cannot be sent is lost", spool.directory, exc,
                           level=logging.ERROR)
            return None
        if spool is self.spool:
            self.counts["spooled"] += len(lines)
        return path

    # ---- the training thread's side ----------------------------------------------------------
    def flush(self, timeout: float) -> bool:
        """Wait until everything enqueued before the call is sent, spooled or rejected."""
        if not self.thread.is_alive():
            return not self.queue
        target = self.enqueued
        self.flush_requested += 1
        self.wake.set()
        deadline = time.monotonic() + timeout
        with self.progress:
            while self.finished + self.dropped() < target:
                left = deadline - time.monotonic()
                if left <= 0 or not self.thread.is_alive():
                    return False
                self.progress.wait(min(left, 0.05))
        return True

    def stop(self, timeout: float) -> bool:
        """Send or spool what is queued within `timeout` seconds, then end the thread: one try per batch, except
        that a 503 or 429 is tried again after its Retry-After when that try can end in time."""
        self.close_deadline = time.monotonic() + max(0.0, timeout)
        self.closing.set()
        self.wake.set()
        if self.thread.is_alive():
            self.thread.join(max(0.0, timeout))
        if self.thread.is_alive():
            # Stuck in a request: spool what is still queued from here; the batch in flight is
            # finished by the thread if the process lives long enough.
            lines, items = [], 0
            while True:
                batch, n = self._take_batch()
                if not n:
                    break
                lines.extend(batch)
                items += n
            if lines:
                self._spool(lines)
            self._finish(items)
            log.warning("warninglight: close() timed out after %.1f s; %d queued items spooled", timeout, len(lines))
            return False
        return True
