"""The inbox page: alerts across the user's runs, filters, and plain-form actions for on-call users."""
import re

import pytest
from django.test import Client

from alerts.models import Alert, Mute
from tests.factories import make_alert, make_rule
from tests.triage_support import triage_rows

pytestmark = pytest.mark.django_db


def page(client, **params):
    response = client.get("/inbox/", params)
    assert response.status_code == 200
    return response.content.decode()


def row_ids(html):
    return [int(pk) for pk in re.findall(r'<tr id="alert-(\d+)"', html)]


@pytest.fixture
def theirs(other_project):
    return make_alert(make_rule(other_project, name="their-rule", kind="nonfinite"), run="their-run")


# --- who sees what -------------------------------------------------------------

def test_the_inbox_needs_a_login(client, alert):
    response = client.get("/inbox/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


@pytest.mark.parametrize("who", ["owner", "teammate"])
def test_members_see_their_projects_alerts_only(client, request, alert, theirs, who):
    client.force_login(request.getfixturevalue(who))
    html = page(client)
    assert row_ids(html) == [alert.pk]
    assert "their-run" not in html and "their-rule" not in html


def test_an_outsider_sees_only_their_own_projects_alerts(client, outsider, alert, theirs):
    client.force_login(outsider)
    html = page(client)
    assert row_ids(html) == [theirs.pk] and "run-a" not in html


def test_a_row_carries_everything_on_call_needs(client, owner, alert):
    client.force_login(owner)
    html = page(client)
    row = re.search(rf'<tr id="alert-{alert.pk}".*?</tr>', html, re.S).group(0)
    assert f'href="/rules/{alert.rule_id}/"' in row and "grad-nonfinite" in row
    assert 'href="/runs/run-a/"' in row
    assert "Pretrain on-call &lt;#pretrain-oncall&gt;" in row
    assert "layers.3" in row and "grad_norm" in row
    assert "10 → 11" in row  # first step → fired step
    assert "2 non-finite points in a row" in row
    assert "steady" in row and "Notify" in row
    assert re.search(r'<a class="diag" href="https://runbooks.example/grad-nonfinite" target="_blank" rel="noopener noreferrer">', row)
    assert 'href="/inbox/"' in html  # the nav link


def test_on_call_gets_action_forms_a_viewer_does_not(client, oncall, teammate, alert):
    client.force_login(oncall)
    html = page(client)
    for form in ("acknowledge", "resolve"):
        assert f'id="{form}-{alert.pk}"' in html and f'data-action="{form}"' in html
    for panel in ("verdict", "mute"):  # a panel static/js/inbox-panels.js fills from the page's one form
        assert f'data-panel="alert-{panel}" data-pk="{alert.pk}"' in html and f'id="{panel}-__PK__"' in html
    client.force_login(teammate)
    html = page(client)
    assert row_ids(html) == [alert.pk]
    assert "<form method=\"post\" id=" not in html and 'data-action="mute"' not in html and "read only" in html


# --- filters --------------------------------------------------------------------

@pytest.fixture
def mixed(rule, project):
    other_rule = make_rule(project, name="loss-spike", kind="threshold")
    return {
        "firing": make_alert(rule, "run-a", "layers.0"),
        "acknowledged": make_alert(rule, "run-a", "layers.1", state="acknowledged"),
        "muted": make_alert(other_rule, "run-b", "", state="muted"),
        "resolved": make_alert(rule, "run-b", "layers.2", state="resolved", reviewed=True),
    }


def test_state_filter_defaults_to_open_newest_first(client, owner, mixed):
    client.force_login(owner)
    assert row_ids(page(client)) == [mixed["muted"].pk, mixed["acknowledged"].pk, mixed["firing"].pk]
    assert row_ids(page(client, state="all")) == [a.pk for a in reversed(list(mixed.values()))]
    for state, alert in mixed.items():
        assert row_ids(page(client, state=state)) == [alert.pk]


def test_project_and_rule_filters(client, owner, mixed, theirs, outsider):
    client.force_login(owner)
    assert row_ids(page(client, state="all", rule=mixed["muted"].rule_id)) == [mixed["muted"].pk]
    assert len(row_ids(page(client, state="all", project="pretrain"))) == 4
    assert row_ids(page(client, state="all", project="vision")) == []  # not theirs to see
    assert row_ids(page(client, state="all", rule=theirs.rule_id)) == []


def test_a_bad_filter_is_named_not_a_crash(client, owner, alert):
    client.force_login(owner)
    html = page(client, state="forgotten", rule="loss")
    assert 'data-field="state"' in html and 'data-field="rule"' in html
    assert row_ids(html) == [alert.pk]


# --- actions --------------------------------------------------------------------

def test_acknowledge_redirects_back_with_the_filters_and_a_message(client, oncall, alert):
    client.force_login(oncall)
    response = client.post(f"/inbox/alerts/{alert.pk}/acknowledge/?state=all&project=pretrain")
    assert response.status_code == 302 and response["Location"] == "/inbox/?state=all&project=pretrain"
    assert Alert.objects.get().state == "acknowledged"
    [row] = triage_rows()
    assert (row.kind, row.by) == ("acknowledged", oncall)
    html = page(client, state="all", project="pretrain")
    assert "Acknowledged grad-nonfinite on run-a (layers.3)." in html
    assert f'id="acknowledge-{alert.pk}"' not in html  # nothing left to acknowledge
    client.post(f"/inbox/alerts/{alert.pk}/acknowledge/")
    assert "was acknowledged already" in page(client) and triage_rows().count() == 1


def test_resolve_from_the_page(client, owner, alert):
    client.force_login(owner)
    assert client.post(f"/inbox/alerts/{alert.pk}/resolve/").status_code == 302
    assert Alert.objects.get().state == "resolved"
    html = page(client)
    assert row_ids(html) == [] and "Resolved grad-nonfinite on run-a (layers.3)." in html
    assert list(triage_rows().values_list("kind", "by")) == [("resolved", owner.pk)]


def test_a_false_alarm_without_a_note_shows_the_error_beside_the_note(client, oncall, alert):
    client.force_login(oncall)
    response = client.post(f"/inbox/alerts/{alert.pk}/verdict/?state=open", {"verdict": "false_alarm", "note": ""})
    assert response.status_code == 400
    html = response.content.decode()
    assert f'id="verdict-{alert.pk}-note-error" data-field="note"' in html
    assert "a note is required for a false alarm" in html
    assert f'id="verdict-{alert.pk}-false_alarm" checked' in html  # what was chosen stays chosen
    assert re.search(r'<details class="act" open>\s*<summary class="button" data-alert-id="%d" data-action="verdict">' % alert.pk, html)
    assert not triage_rows().exists()
    ok = client.post(f"/inbox/alerts/{alert.pk}/verdict/", {"verdict": "false_alarm", "note": "eval loader restart"})
    assert ok.status_code == 302
    assert list(triage_rows().values_list("kind", "verdict", "note")) == [("verdict", "false_alarm", "eval loader restart")]
    assert "Verdict on grad-nonfinite on run-a (layers.3): false alarm." in page(client)


@pytest.mark.parametrize(
    "post, field",
    [
        ({"scope": "run", "reason": "", "duration_minutes": "60"}, "reason"),
        ({"scope": "run", "reason": "bad node", "duration_minutes": ""}, "duration_minutes"),
        ({"scope": "run", "reason": "bad node", "duration_minutes": "99999"}, "duration_minutes"),
        ({"scope": "everything", "reason": "bad node", "duration_minutes": "60"}, "scope"),
    ],
)
def test_a_mute_without_a_reason_or_an_expiry_shows_the_error_beside_its_field(client, oncall, alert, post, field):
    client.force_login(oncall)
    response = client.post(f"/inbox/alerts/{alert.pk}/mute/", post)
    assert response.status_code == 400
    assert f'data-field="{field}"' in response.content.decode()
    assert not Mute.objects.exists() and Alert.objects.get().state == "firing"


def test_the_page_offers_no_indefinite_mute(client, oncall, alert):
    client.force_login(oncall)
    html = page(client)
    select = re.search(rf'<select name="duration_minutes" id="mute-__PK__-duration".*?</select>', html, re.S).group(0)
    assert re.findall(r'<option value="(\d*)"', select) == ["", "60", "240", "1440", "10080"]
    assert "forever" not in select.lower()


def test_mute_from_the_page(client, oncall, alert):
    client.force_login(oncall)
    response = client.post(f"/inbox/alerts/{alert.pk}/mute/", {"scope": "component", "reason": "layer 3 known bad", "duration_minutes": "240"})
    assert response.status_code == 302
    mute = Mute.objects.get()
    assert (mute.scope, mute.component, mute.reason, mute.created_by) == ("component", "layers.3", "layer 3 known bad", oncall)
    assert 3.9 < (mute.expires_at - mute.created_at).total_seconds() / 3600 <= 4
    assert Alert.objects.get().state == "muted"
    html = page(client)
    assert "1 open alert muted" in html
    assert f'data-mute-id="{mute.pk}" title="layer 3 known bad">until ' in html


def test_acting_on_a_resolved_alert_says_why_at_the_top(client, owner, rule):
    resolved = make_alert(rule, state="resolved", reviewed=True)
    client.force_login(owner)
    response = client.post(f"/inbox/alerts/{resolved.pk}/acknowledge/", follow=True)
    assert "a resolved alert cannot be acknowledged" in response.content.decode()
    assert not triage_rows().exists()


@pytest.mark.parametrize("action", ["acknowledge", "resolve", "verdict", "mute"])
def test_viewers_get_403_outsiders_404_and_anonymous_the_login(client, teammate, outsider, alert, action):
    url = f"/inbox/alerts/{alert.pk}/{action}/"
    post = {"verdict": "actionable", "scope": "run", "reason": "x", "duration_minutes": "60"}
    assert client.post(url, post)["Location"].startswith("/accounts/login/")
    client.force_login(teammate)
    assert client.post(url, post).status_code == 403
    client.force_login(outsider)
    assert client.post(url, post).status_code == 404
    # A panel's URL also answers GET (the inbox with that form open, tests/test_inbox_actions_without_javascript.py).
    assert client.get(url).status_code == (404 if action in ("verdict", "mute") else 405)
    assert not triage_rows().exists() and Alert.objects.get().state == "firing"


def test_page_actions_need_the_csrf_token(owner, alert):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(owner)
    assert browser.post(f"/inbox/alerts/{alert.pk}/acknowledge/").status_code == 403
    html = browser.get("/inbox/").content.decode()
    csrf = re.search(rf'id="acknowledge-{alert.pk}".*?name="csrfmiddlewaretoken" value="([^"]+)"', html, re.S).group(1)
    assert browser.post(f"/inbox/alerts/{alert.pk}/acknowledge/", {"csrfmiddlewaretoken": csrf}).status_code == 302
    assert Alert.objects.get().state == "acknowledged"
