"""Every console page an on-call reads of a seeded project — the inbox, the runs list and a run, the rules list and
a rule, the audit report and the channels page — shows words: no Python literal or JSON object, no snake_case
flag names, plurals that agree with their numbers, and every time in one format with its zone named."""
import re
from html.parser import HTMLParser

import pytest
from django.utils import timezone

from alerts.incidents import group_new_alerts
from ingest.models import Attempt, Run
from notifications.models import Delivery
from tests.factories import client_for, make_alert, make_rule
from tests.notify_support import make_channel
from tests.review_support import send, series

pytestmark = pytest.mark.django_db

LITERALS = re.compile(r"[{}]|\b(True|False(?! [Aa]larm)|None)\b")  # "False alarm" is a verdict's name
TIME_FORMAT = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC$")
# Anything that looks like a clock time, in any of the formats the pages used to mix.
CLOCK = re.compile(r"\d{1,2}:\d{2}")


class Page(HTMLParser):
    """A page's visible text nodes, and the text of its <time> elements apart."""

    def __init__(self):
        super().__init__()
        self.skip, self.in_time, self.texts, self.times, self.time_attrs = 0, 0, [], [], []

    def handle_starttag(self, tag, attrs):
        self.skip += tag in ("script", "style", "head", "textarea")
        if tag == "time":
            self.in_time += 1
            self.time_attrs.append(dict(attrs).get("datetime"))

    def handle_endtag(self, tag):
        self.skip -= tag in ("script", "style", "head", "textarea") and self.skip > 0
        self.in_time -= tag == "time" and self.in_time > 0

    def handle_data(self, data):
        if self.skip or not data.strip():
            return
        (self.times if self.in_time else self.texts).append(data.strip())


def read(client, path):
    response = client.get(path)
    assert response.status_code == 200, (path, response.status_code)
    page = Page()
    page.feed(response.content.decode())
    return page


@pytest.fixture
def seeded(sender, project, owner):
    """A run with tags and config that restarted once, a rule with points-based persistence, an alert firing and one
    resolved without a verdict (grouped into an incident), and a channel with a delivery."""
    run = {"id": "seeded", "budget": {"steps": 600}, "tags": {"team": "pretrain", "size": "410m"},
           "config": {"lr": 0.0003, "fp16": True, "warmup": None, "optim": {"betas": [0.9, 0.95]}}}
    send(sender, run, series("loss", range(0, 101, 10), [2.5 - s / 1000 for s in range(0, 101, 10)]))
    send(sender, "seeded", series("loss", range(100, 201, 10), [2.4] * 11), phases=[{"step": 100, "phase": "restart"}])
    rule = make_rule(project, persistence={"points": 3, "resolve_points": 10})
    seeded_run = Run.objects.get(run_id="seeded")
    make_alert(rule, seeded_run, component="layers.1")
    make_alert(rule, seeded_run, component="layers.2", state="resolved", first_step=30)
    group_new_alerts(seeded_run)
    channel = make_channel(project, url="http://127.0.0.1:9/hook", name="oncall-hook")
    Delivery.objects.create(channel=channel, attempt=1, at=timezone.now(), duration_ms=12, status="failed",
                            status_code=500)
    return rule


def pages(client, rule):
    return {
        "the inbox": read(client, "/inbox/?state=all"),
        "the inbox's default view": read(client, "/inbox/"),
        "the runs list": read(client, "/"),
        "the run page": read(client, "/runs/seeded/"),
        "the rules list": read(client, "/rules/"),
        "the rule page": read(client, f"/rules/{rule.pk}/"),
        "the audit report": read(client, "/reports/rules/?project=pretrain"),
        "the channels page": read(client, "/channels/"),
    }


def test_every_page_shows_words_plurals_that_agree_and_one_time_format(seeded, owner):
    assert Attempt.objects.filter(run__run_id="seeded", reason="restart_phase").exists()
    shown = pages(client_for(owner), seeded)

    # Every problem is collected, so a failure names all of them at once.
    problems = []
    for where, page in shown.items():
        raw = [t for t in page.texts + page.times if LITERALS.search(t)]
        if raw:
            problems.append(f"{where} shows raw values: {raw}")
        # Plurals agree: never "1 alerts", "1 incidents", "1 alert ended by themselves".
        text = " ".join(page.texts)
        wrong = re.findall(r"(?<![\d.,])1 (?:alerts|incidents|runs|rules)\b|1 alert ended by themselves", text)
        if wrong:
            problems.append(f"{where}: {wrong}")
        # Every time: one format, in UTC, inside a <time datetime> the local-time toggle can rewrite.
        odd = [t for t in page.times if not TIME_FORMAT.match(t)]
        if odd or not all(page.time_attrs):
            problems.append(f"{where} shows times in another format: {odd}")
        loose = [t for t in page.texts if CLOCK.search(t)]
        if loose:
            problems.append(f"{where} shows a time outside the one format: {loose}")

    inbox = " ".join(shown["the inbox's default view"].texts)
    if "1 alert ended by itself and nobody said whether it was real" not in inbox:
        problems.append("the inbox's resolved alert does not end by itself")

    run = shown["the run page"]
    if "restart phase" not in run.texts:  # the attempt's reason, not "Restart Phase"
        problems.append("the run page's attempt reason is not 'restart phase'")
    if not ("team=pretrain" in run.texts and "fp16" in run.texts and "optim" in run.texts
            and "betas 0.9, 0.95" in run.texts):  # the config as key and value, not JSON
        problems.append("the run page's tags and config are not key-value words")
    if not run.times:
        problems.append("the run page's attempt start has no <time>")

    rule = " ".join(shown["the rule page"].texts).lower()
    if "fires after 3 points in a row; resolves after 10 clear points in a row" not in rule:
        problems.append("the rule page's persistence is not in words")

    report = shown["the audit report"]
    flags = [t for t in report.texts if t.startswith(("never triaged", "never_triaged"))]
    if not flags or not all(t.startswith("never triaged: 2 alerts, none triaged") for t in flags):
        problems.append(f"the audit report's flags: {flags}")
    if [t for t in report.texts if re.search(r"\b[a-z]+_[a-z_]+:", t)]:
        problems.append("the audit report names a flag by its key")
    if len(report.times) < 3:  # the period's start and end, the rule's last fire
        problems.append(f"the audit report's times are not <time> elements: {report.times}")

    if not shown["the channels page"].times:
        problems.append("the channels page's last delivery has no <time>")
    assert not problems, "\n".join(problems)


def test_the_footer_offers_the_viewers_local_time_with_no_inline_script(seeded, owner):
    html = client_for(owner).get("/runs/seeded/").content.decode()
    assert 'id="local-time-toggle"' in html and "Times are shown in UTC" in html
    assert re.search(r'<script src="[^"]*js/local-time\.js"></script>', html)
    # Data islands (type="application/json") are not run; any other script without a src would be.
    assert not re.search(r'<script(?![^>]*\b(?:src=|type="application/json"))[^>]*>', html), "an inline script"
