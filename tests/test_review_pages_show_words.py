"""Every page a reviewer reads of a seeded project — the review's steps, a refused decision, the chronicle, the
interruptions page, the decision log and the postmortem — shows words and numbers, never a Python literal, a JSON
object or a field's snake_case name."""
import re
from html.parser import HTMLParser

import pytest

from ingest.models import Run
from reviews.models import Review
from tests.factories import client_for
from tests.review_support import send, series

pytestmark = pytest.mark.django_db

LITERALS = re.compile(r"[{}\[\]]|\b(True|False|None)\b")
SNAKE = re.compile(r"\b[a-z]+_[a-z_]+\b")


class VisibleText(HTMLParser):
    def __init__(self):
        super().__init__()
        self.skip, self.parts = 0, []

    def handle_starttag(self, tag, attrs):
        self.skip += tag in ("script", "style", "head")

    def handle_endtag(self, tag):
        self.skip -= tag in ("script", "style", "head") and self.skip > 0

    def handle_data(self, data):
        if not self.skip and data.strip():
            self.parts.append(data.strip())


def visible(html):
    parser = VisibleText()
    parser.feed(html)
    return parser.parts


def assert_words_only(where, texts):
    raw = [t for t in texts if LITERALS.search(t)]
    assert not raw, f"{where} shows raw values: {raw}"
    snake = [t for t in texts if SNAKE.search(t)]
    assert not snake, f"{where} shows field names: {snake}"


@pytest.fixture
def seeded(sender):
    """A run at the end of its 600-step budget, with tags, config, phases and points sent without their own times."""
    run = {"id": "seeded", "budget": {"steps": 600}, "tags": {"team": "pretrain", "stage": "base"},
           "config": {"lr": 0.0003, "fp16": True, "optim": {"betas": [0.9, 0.95]}}}
    phases = [{"step": 0, "phase": "steady"}, {"step": 300, "phase": "checkpoint"}]
    # A reference run with another config, and sliced evaluations, so steps 3 and 4 have tables to show.
    send(sender, {"id": "ref", "config": {"lr": 0.0006, "fp16": False}},
         series("loss", range(0, 601, 10), [2.1 + 5.0 / (s + 10) for s in range(0, 601, 10)]))
    for name in ("eval/code/loss", "eval/web/loss"):
        send(sender, "ref", series(name, range(100, 601, 100), [2.5] * 6))
        send(sender, run, series(name, range(100, 601, 100), [2.4, 2.45, 2.5, 2.6, 2.7, 2.8]))
    Run.objects.filter(run_id="ref").update(reference=True)
    for lo in range(0, 601, 200):
        steps = range(lo, min(lo + 200, 601))
        send(sender, run if lo == 0 else "seeded", series("loss", steps, [2.0 + 5.0 / (s + 10) for s in steps]),
             phases=phases if lo == 0 else ())


def test_every_review_page_and_the_postmortem_show_words_not_literals(seeded, oncall):
    client = client_for(oncall)
    started = client.post("/reviews/new/", {"run": "seeded"})
    assert started.status_code == 302
    review = Review.objects.get()
    page = client.get(started["Location"]).content.decode()
    texts = visible(page)
    assert "tags" in texts and "team pretrain; stage base" in texts  # not {"team": "pretrain", …}
    assert "checkpoint since step 300" in texts  # not "checkpoint (checkpoint)"
    assert "stalled" in texts and texts[texts.index("stalled") + 1] == "no"  # not "stalled False"
    assert "checkpoints" in texts  # not "checkpoint checkpoints"
    assert "no data" in texts  # a check's state, not "no_data"
    assert_words_only("the review page", texts)

    refused = client.post(f"/reviews/{review.pk}/decision/", {"decision": "terminate", "observation": "flat",
                                                               "explanations": "done"})
    assert refused.status_code == 400
    errors = [t for t in visible(refused.content.decode()) if "confirm" in t.lower()]
    assert errors and all("artifacts_preserved" not in t for t in errors)
    assert_words_only("a refused decision", visible(refused.content.decode()))

    decided = client.post(f"/reviews/{review.pk}/decision/", {"decision": "terminate", "observation": "flat",
                                                               "explanations": "done", "artifacts_preserved": "on",
                                                               "run_finished_ok": "on"})  # the run is at its budget's end
    assert decided.status_code == 302
    assert_words_only("the decided review", visible(client.get(started["Location"]).content.decode()))
    assert "no time data" in visible(client.get("/runs/seeded/chronicle/").content.decode())  # not "5 s"

    for url in ("/runs/seeded/chronicle/", "/projects/pretrain/interruptions/", "/decisions/?run=seeded"):
        answer = client.get(url)
        assert answer.status_code == 200, url
        assert_words_only(url, visible(answer.content.decode()))

    markdown = client.get("/api/v1/runs/seeded/postmortem.md")
    text = markdown.content.decode()
    assert markdown.status_code == 200, text[:200]
    assert "| Budget | 600 steps |" in text and "{" not in text and "}" not in text
    assert "| Training time (points' own times) | no time data |" in text
    assert not re.search(r"\b(True|False|None)\b", text)



def test_a_decision_form_sent_empty_names_its_fields_as_labelled(seeded, oncall):
    # The errors once read "decision: This field is required.", "observation: …": the field's name, lower case,
    # above a form whose inputs are labelled "Decision", "Observation".
    client = client_for(oncall)
    started = client.post("/reviews/new/", {"run": "seeded"})
    review = Review.objects.get()
    for url, body in ((f"/reviews/{review.pk}/decision/", {}), ("/decisions/new/", {"run": "seeded"})):
        refused = client.post(url, body)
        assert refused.status_code == 400, url
        texts = visible(refused.content.decode())
        assert "Observation: This field is required." in texts, (url, [t for t in texts if "required" in t])
        assert not [t for t in texts if re.match(r"[a-z_]+: ", t)], url
    assert started.status_code == 302
