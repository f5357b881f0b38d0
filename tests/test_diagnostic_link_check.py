"""The periodic link check: a rule's diagnostic link answers or not, kept as a row the report shows (no internet:
a local http.server in a thread, a refused port, a socket that never answers)."""
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.conf import settings

from alerts.models import Rule
from audit.models import LinkCheck
from audit.report import Flag, report_rows
from audit.tasks import check_diagnostic_links, check_link
from tests.audit_support import PERIOD
from tests.factories import make_rule


class Handler(BaseHTTPRequestHandler):
    def do_HEAD(self):
        if self.path == "/get-only":
            self.send_response(405)  # some servers refuse HEAD: the check tries GET next
        else:
            self.send_response(200 if self.path == "/ok" else 404)
        self.end_headers()

    def do_GET(self):
        self.send_response(200 if self.path in ("/ok", "/get-only") else 404)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def refused():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    return f"http://127.0.0.1:{port}/"


@pytest.fixture
def silent():
    """Accepts connections (the kernel's backlog) and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}/"
    sock.close()


def rule_at(project, name, url):
    rule = make_rule(project, name)
    Rule.objects.filter(pk=rule.pk).update(diagnostic_url=url)
    rule.diagnostic_url = url
    return rule


def test_answering_links(project, server):
    ok = check_link(rule_at(project, "ok", f"{server}/ok"), timeout=2)
    get_only = check_link(rule_at(project, "get-only", f"{server}/get-only"), timeout=2)
    assert (ok.ok, ok.status_code, ok.error) == (True, 200, "")
    assert (get_only.ok, get_only.status_code) == (True, 200)


def test_a_missing_page_refused_connection_and_timeout_do_not_answer(project, server, refused, silent):
    missing = check_link(rule_at(project, "missing", f"{server}/missing"), timeout=2)
    assert (missing.ok, missing.status_code) == (False, 404)
    down = check_link(rule_at(project, "refused", refused), timeout=2)
    assert (down.ok, down.status_code) == (False, None) and "Refused" in down.error
    slow = check_link(rule_at(project, "silent", silent), timeout=0.5)
    assert (slow.ok, slow.status_code) == (False, None) and "timed out" in slow.error.lower()


def test_a_console_runbook_link_answers_when_the_runbook_exists(project):
    check = check_link(rule_at(project, "nonfinite-loss", f"{settings.CONSOLE_URL}/runbooks/nonfinite-loss/"), timeout=0.5)
    assert (check.ok, check.status_code) == (True, 200)


def test_the_periodic_task_checks_every_enabled_rule_and_the_report_shows_the_latest(project, server, refused):
    rule_at(project, "ok", f"{server}/ok")
    rule_at(project, "refused", refused)
    off = rule_at(project, "off", refused)
    Rule.objects.filter(pk=off.pk).update(enabled=False)
    assert check_diagnostic_links() == 2
    assert LinkCheck.objects.filter(rule=off).count() == 0
    rows = {r["rule"]: r for r in report_rows(project, PERIOD)}
    assert rows["ok"]["link"]["ok"] is True and Flag.LINK_DOWN not in {f["flag"] for f in rows["ok"]["flags"]}
    latest = LinkCheck.objects.get(rule__name="refused")
    assert rows["refused"]["link"] == {"url": refused, "ok": False, "status_code": None, "error": latest.error,
                                       "checked_at": latest.checked_at.isoformat()}
    assert Flag.LINK_DOWN in {f["flag"] for f in rows["refused"]["flags"]}
