"""In Chromium: one review carried from an alert to a saved decision.

A rule whose permitted response is `review` fires on a NaN loss; the review it opened is one click from the
inbox's incident row; the reviewer reads the six steps, checks one, picks evidence, decides, and the decision
log shows the entry. Screenshots of the review and the log go to var/screenshots/ (docs/reviews.md shows
copies of them).
"""
import pytest

from reviews.models import LogEntry, Review
from tests.browser import log_in, screenshot
from tests.factories import make_rule

pytestmark = [pytest.mark.browser]


@pytest.fixture
def alerted_run(console_server, project, owner, sender):
    make_rule(project, "nonfinite-loss", kind="nonfinite", scope={"metrics": ["loss"]},
              persistence={"points": 1, "resolve_points": 3}, response="review")
    phases = [{"step": 0, "phase": "steady"}, {"step": 100, "phase": "checkpoint"}, {"step": 101, "phase": "steady"}]
    points = [{"step": s, "metric": "loss", "value": "NaN" if s == 180 else 3.0 - s / 200} for s in range(200)]
    points += [{"step": s, "metric": "grad_norm", "component": f"layers.{i}", "value": 1.0} for s in range(0, 200, 10) for i in range(2)]
    body = {"run": {"id": "llama-ft-9", "config": {"lr": 3e-4, "batch": 256}, "budget": {"steps": 1000}}, "points": points,
            "phases": phases}
    assert sender.post(body).status_code == 202
    [review] = Review.objects.filter(run__run_id="llama-ft-9")
    return review


def test_a_reviewer_goes_from_the_alert_to_a_saved_decision(browser, console_server, alerted_run, owner):
    page = log_in(browser, console_server, "olivia", "pw-olivia")
    page.goto(console_server.url + "/inbox/")
    page.locator("a.incident-review").first.click()
    page.wait_for_selector("#step-6")
    assert page.url.endswith(f"/reviews/{alerted_run.pk}/")
    assert "an alert of a rule whose permitted response is review" in page.inner_text("#review-trigger")
    assert page.locator("section.review-step").count() == 6
    for number in range(1, 6):
        assert page.locator(f"#step-{number}").get_attribute("data-state") in ("pass", "attention", "fail", "no_data")

    page.locator("#step-2 input[name=note]").fill("the NaN at step 180 is the only one")
    page.locator("#step-2 button[type=submit]").click()
    page.wait_for_selector("#review-messages")
    assert "Checked by olivia" in page.inner_text("#step-2")

    form = page.locator("#decision-form")
    form.locator("input[name=decision][value=continue]").check()
    form.locator("textarea[name=observation]").fill("One NaN loss at step 180; no NaN in gradients")
    form.locator("textarea[name=explanations]").fill("a bad batch\nan fp16 overflow in the loss only")
    form.locator("input[name=evidence]").first.check()
    form.locator("input[name=next_step]").fill("400")
    page.locator("#decision-save").click()
    page.wait_for_selector("#review-decision, #decision-errors")
    assert not page.locator("#decision-errors").count(), page.inner_text("#decision-errors")
    assert page.locator("#review-decision").get_attribute("data-decision") == "continue"
    assert "at step 400" in page.inner_text("#review-decision")
    screenshot(page, "review-decided")

    entry = LogEntry.objects.get()
    assert entry.review_id == alerted_run.pk and entry.explanations == ["a bad batch", "an fp16 overflow in the loss only"]
    assert entry.links["alerts"] == [alerted_run.alert_id] and len(entry.links["evidence"]) == 1
    page.locator(f'a[href="/decisions/?run=llama-ft-9#entry-{entry.pk}"]').click()
    page.wait_for_selector(f"#entry-{entry.pk}")
    assert "One NaN loss at step 180" in page.inner_text(f"#entry-{entry.pk}")
    screenshot(page, "decision-log")


def test_an_evidence_link_opens_the_run_page_at_its_step_range(browser, console_server, alerted_run, owner):
    page = log_in(browser, console_server, "olivia", "pw-olivia")
    page.goto(console_server.url + "/runs/llama-ft-9/?metric=grad_norm&component=layers.1&start=150&end=199")
    page.wait_for_selector(".chart-focus[data-drawn='1']")
    assert page.evaluate("document.body.dataset.linkedRange") == "150-199"
    assert page.evaluate("document.body.dataset.linkedChart") == "grad_norm@layers.1"
    steps = page.evaluate("[].concat(...document.querySelector('.chart-focus').data.map((t) => t.x || []))")
    assert steps and min(steps) >= 150 and max(steps) <= 199
