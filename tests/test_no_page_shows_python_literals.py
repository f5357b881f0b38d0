"""No console page shows a Python literal or a JSON object as text: every HTML page route of the console, filled
from one richly seeded project (runs with phases, a restart and non-finite values, alerts in every state with
verdicts, incidents, a mute, a review through its six steps with a decision and a correction, a channel, a backtest,
a sent report), is read as its owner and its visible text searched for what a program's value looks like.

The routes are walked from the URL resolver, so a new page is read without anyone adding it here: a route whose
path parameters this test cannot fill fails the test instead of being skipped."""
import pytest
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone

from alerts import triage
from alerts.incidents import group_new_alerts
from alerts.models import BacktestJob, Incident, Mute
from alerts.starter import RUNBOOKS
from audit.models import SentReport
from audit.report import Period
from audit.tasks import send_owner_report
from ingest.models import Attempt, Run
from notifications.models import Delivery
from reviews.models import LogEntry, Review
from tests.backtest_support import backtested, draft
from tests.factories import OWNER, client_for, make_alert, make_rule
from tests.incident_support import healthy, nan_in_one_weight, starter_project
from tests.notify_support import make_channel
from tests.page_text_support import problems_of
from tests.review_support import send

pytestmark = pytest.mark.django_db

# Pages that edit rules or channels as JSON show examples of it: only there are <pre>/<code> skipped.
SHOWS_CODE = {"rule_new", "rule_edit", "channel_new", "channel_edit"}

# --- the seeded project -----------------------------------------------------------------------------------

def ingest(sender, run, points, phases=()):
    send(sender, run, points, phases=phases)


@pytest.fixture
def seeded(sender, project, owner, other_project, django_capture_on_commit_callbacks):
    starter_project(project)
    loss_rule = make_rule(project, "loss-high", kind="threshold", scope={"metrics": ["loss"]},
                          persistence={"points": 1, "resolve_points": 3}, params={"above": 10.0})
    band = make_rule(project, "loss-band", persistence={"points": 3, "resolve_points": 10})
    make_rule(project, "grad-spike", kind="threshold", response="review")
    make_rule(project, "data-gap", kind="absence", response="stop")

    # A run that restarted, with phases, tags, config, a budget and a NaN in one weight (a sticky incident).
    identity = {"id": "nan-run", "name": "pythia 410m seed 4", "budget": {"steps": 600, "gpu_hours": 12.5},
                "tags": {"team": "pretrain", "size": "410m", "precision": "fp16"},
                "config": {"lr": 0.0003, "warmup": None, "optim": {"betas": [0.9, 0.95]}, "fp16": False}}
    ingest(sender, identity, healthy(range(0, 40)), phases=[{"step": 0, "phase": "warmup"}, {"step": 10, "phase": "steady"},
                                                            {"step": 20, "phase": "eval"}, {"step": 22, "phase": "steady"}])
    ingest(sender, "nan-run", nan_in_one_weight(40))
    ingest(sender, "nan-run", healthy(range(41, 80)) + [{"step": 80, "metric": "loss", "value": "Infinity"}],
           phases=[{"step": 60, "phase": "checkpoint"}, {"step": 61, "phase": "steady"}])
    ingest(sender, {"id": "nan-run", "tags": {"team": "pretrain", "size": "410m", "precision": "bf16"}},
           healthy(range(70, 100)), phases=[{"step": 70, "phase": "restart"}])
    assert Attempt.objects.filter(run__run_id="nan-run").count() > 1

    # A loss spike that cleared with nobody's word on it: a "healthy" run that needs review.
    ingest(sender, "spiked", [{"step": s, "metric": "loss", "value": 20.0 if s in (21, 22) else 2.0} for s in range(40)])

    # Alerts in every state, with verdicts, grouped into incidents.
    run = Run.objects.create(project=project, run_id="triaged/run-a", tags={"team": "pretrain"}, max_step=200, last_step=200)
    firing = make_alert(band, run, "layers.1", first_step=100)
    acked = make_alert(loss_rule, run, "", metric="loss", first_step=120)
    to_mute = make_alert(make_rule(project, "act-high", kind="threshold", scope={"metrics": ["act_norm"]}), run, "layers.2")
    judged = make_alert(band, run, "layers.3", state="resolved", first_step=30, verdict="false_alarm", reviewed=True)
    actionable = make_alert(band, run, "layers.4", state="resolved", first_step=50, verdict="actionable", reviewed=True)
    make_alert(band, run, "layers.5", state="resolved", first_step=60)  # resolved, no verdict
    group_new_alerts(run)
    with django_capture_on_commit_callbacks(execute=True):
        triage.acknowledge(acked, owner)
        triage.give_verdict(firing, owner, "actionable", note="real: the loss left its band")
        mute = triage.mute(to_mute, owner, "run", "known noisy layer during the data refresh", duration_minutes=90)
        triage.give_verdict(judged, owner, "false_alarm", note="a bad batch")
        triage.give_verdict(actionable, owner, "actionable")
    client = client_for(owner)
    assert client.post(f"/api/v1/mutes/{mute.pk}/comments/", {"text": "still noisy at step 150"},
                       content_type="application/json").status_code in (200, 201)

    # A review of the NaN incident through its six steps, its decision, and a correction of that decision.
    incident = Incident.objects.filter(run__run_id="nan-run").order_by("id").first()
    opened = client.post("/api/v1/reviews/", {"run": "nan-run", "incident": incident.pk}, content_type="application/json")
    assert opened.status_code == 201, opened.content
    review = opened.json()
    for number in range(1, 6):
        checked = client.post(f"/api/v1/reviews/{review['id']}/steps/{number}/", {"note": f"looked at step {number}"},
                              content_type="application/json")
        assert checked.status_code == 200, checked.content
    decided = client.post(f"/api/v1/reviews/{review['id']}/decision/", {
        "decision": "continue", "observation": "one NaN in layers.4, finite since the restart",
        "explanations": ["fp16 overflow"], "next_review": {"step": 500}, "expected_next": "no NaN by step 500",
    }, content_type="application/json")
    assert decided.status_code == 201, decided.content
    corrected = client.post("/api/v1/decisions/", {
        "run": "nan-run", "observation": "the NaN was in layers.4's weights, not its gradients",
        "explanations": ["misread the chart"], "corrects": decided.json()["entry"]["id"],
    }, content_type="application/json")
    assert corrected.status_code == 201, corrected.content
    still_open = client.post("/api/v1/reviews/", {"run": "spiked"}, content_type="application/json")
    assert still_open.status_code == 201, still_open.content

    # A channel with a failed delivery, a finished backtest, a sent weekly report.
    channel = make_channel(project, url="http://127.0.0.1:9/hook", name="oncall-hook")
    Delivery.objects.create(channel=channel, attempt=1, at=timezone.now(), duration_ms=12, status="failed", status_code=500)
    backtested(owner, draft())
    send_owner_report(project, OWNER, Period.week_before(timezone.now()))
    return {"run": Run.objects.get(run_id="nan-run"), "rule": band, "mute": Mute.objects.get(pk=mute.pk),
            "incident": incident, "review": Review.objects.get(pk=review["id"]),
            "open_review": Review.objects.get(pk=still_open.json()["id"]),
            "incidents": list(Incident.objects.order_by("id")), "alert": firing, "channel": channel,
            "job": BacktestJob.objects.order_by("-id").first(), "sent": SentReport.objects.order_by("-id").first(),
            "entry": LogEntry.objects.order_by("-id").first()}


# --- the console's page routes ----------------------------------------------------------------------------

def console_routes():
    """(route name, its pattern's parameter names) for every page route under the "console" namespace."""
    found = []

    def walk(patterns, namespace):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, pattern.namespace or namespace)
            elif isinstance(pattern, URLPattern) and namespace == "console":
                found.append((pattern.name, sorted(pattern.pattern.converters)))

    walk(get_resolver().url_patterns, None)
    return found


def fillers(seeded):
    """How each route's path parameters are filled: by route name first, then by parameter name."""
    s = seeded
    by_route = {
        "rule": s["rule"], "rule_edit": s["rule"], "rule_delete": s["rule"], "backtest": s["job"],
        "mute": s["mute"], "mute_comment": s["mute"], "incident": s["incidents"],
        "review": [s["review"], s["open_review"]], "review-check": s["review"], "review-compare": s["review"], "review-decide": s["review"],
        "channel": s["channel"], "channel_edit": s["channel"], "channel_delete": s["channel"], "channel_test": s["channel"],
        "reports-sent-one": s["sent"],
        **{name: s["alert"] for name in ("inbox_acknowledge", "inbox_resolve", "inbox_verdict", "inbox_new_normal", "inbox_mute")},
        **{name: s["incident"] for name in ("inbox_incident_acknowledge", "inbox_incident_verdict", "inbox_incident_mute")},
    }
    by_param = {"run_id": [s["run"].run_id, "spiked", "triaged/run-a"], "slug": [s["run"].project.slug],
                "name": sorted(RUNBOOKS), "number": [1, 6]}
    return by_route, by_param


def urls_of(name, params, seeded):
    by_route, by_param = fillers(seeded)
    if not params:
        return [reverse(f"console:{name}")]
    if params == ["pk"]:
        if name not in by_route:
            pytest.fail(f"console:{name} takes a pk this test does not know how to fill: add its object to fillers()")
        objects = by_route[name] if isinstance(by_route[name], list) else [by_route[name]]
        return [reverse(f"console:{name}", kwargs={"pk": o.pk}) for o in objects]
    if params == ["number", "pk"]:
        return [reverse(f"console:{name}", kwargs={"pk": by_route[name].pk, "number": n}) for n in by_param["number"]]
    [param] = [p for p in params] if len(params) == 1 else [None]
    if param not in by_param:
        pytest.fail(f"console:{name} takes {params}, which this test does not know how to fill: add them to fillers()")
    return [reverse(f"console:{name}", kwargs={param: value}) for value in by_param[param]]


# Pages that need a query (a project, a period): bare, they answer 400 with a page naming what is missing.
NEED_A_QUERY = {"reports-rules", "reports-rules-print", "reports-fatigue"}
# Query-string variants of some pages that render other parts of their templates.
VARIANTS = {
    "inbox": ["?state=all", "?state=resolved_no_verdict", "?state=needs_review", "?state=muted", "?project=pretrain"],
    "runs": ["?status=healthy", "?tag=team=pretrain", "?q=nan"],
    "reports-rules": ["?project=pretrain"],
    "reports-rules-print": ["?project=pretrain"],
    "reports-fatigue": ["?project=pretrain"],
    "mutes": ["?status=all", "?status=ended"],
    "decisions": ["?run=nan-run"],
    "rule_new": ["?project=pretrain"],
}


def test_every_console_page_shows_words_not_program_values(seeded, owner):
    client = client_for(owner)
    problems, read, actions = [], [], []
    for name, params in console_routes():
        for url in urls_of(name, params, seeded):
            for query in ["", *VARIANTS.get(name, [])]:
                response = client.get(url + query)
                if response.status_code == 405:  # an action (POST only), not a page
                    assert "POST" in response["Allow"], (url, response["Allow"])
                    actions.append(name)
                    break
                expected = 400 if name in NEED_A_QUERY and not query else 200
                assert response.status_code == expected, (url + query, response.status_code)
                if not response["Content-Type"].startswith("text/html"):
                    continue
                read.append(url + query)
                problems += [f"{url + query}: {p}" for p in problems_of(response.content.decode(), name in SHOWS_CODE)]
    # The walk reached the pages it must (a resolver walk that found nothing would pass vacuously).
    for must in ("/", "/inbox/", f"/runs/{seeded['run'].run_id}/", f"/reviews/{seeded['review'].pk}/", "/decisions/",
                 f"/incidents/{seeded['incident'].pk}/", f"/mutes/{seeded['mute'].pk}/", "/reports/rules/print/",
                 f"/rules/backtests/{seeded['job'].pk}/", f"/reports/sent/{seeded['sent'].pk}/", "/channels/"):
        assert must in read, f"{must} was not read"
    assert "inbox_acknowledge" in actions and "review-decide" in actions
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("html, skip_code, found", [
    ("<p>tags: {'team': 'pretrain'}</p>", False, True),
    ('<td>{"steps": 600}</td>', False, True),
    ("<td>None</td>", False, True),
    ("<td>fp16 True</td>", False, True),
    ("<td>value nan</td>", False, True),
    ("<td>-inf</td>", False, True),
    ("<li>never_triaged: 2 alerts</li>", False, True),
    ("<p>(1 alerts)</p>", False, True),
    ("<p><strong>1</strong> incidents</p>", False, True),
    ("<p>started datetime.datetime(2026, 1, 1)</p>", False, True),
    ("<p>&lt;QuerySet []&gt;</p>", False, True),
    ('<pre>{"name": "loss-nonfinite"}</pre>', False, True),
    ('<pre>{"name": "loss-nonfinite"}</pre>', True, False),
    ('<a title="{&quot;a&quot;: 1}" href="/x?a=1">None of these</a>', False, False),
    ("<p>False alarm · 1 alert · 11 alerts · non-finite · NaN · infinite</p>", False, False),
    ('<script type="application/json">{"a": null}</script>', False, False),
])
def test_the_search_finds_program_values_and_passes_words(html, skip_code, found):
    assert bool(problems_of(html, skip_code)) is found, problems_of(html, skip_code)
