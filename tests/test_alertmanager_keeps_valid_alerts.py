"""One bad alert never costs the notification its good ones: Alertmanager drops a notification answered 4xx.

Before: one alert whose `run` label was not a run id made the whole
notification a 400, and Alertmanager (which treats 4xx as final) dropped the
valid alerts beside it. Now what is valid is stored, an alert whose run label
cannot be used goes to the project's catch-all run with the label kept, and the
answer (202) names what was put aside, per alert path. Only a body that is not
an Alertmanager notification at all is a 4xx.
"""
import pytest

from ingest.models import Run
from tests.alertmanager_support import am_alert, notification
from tests.conftest import stored_counts

pytestmark = pytest.mark.django_db

CATCH_ALL = "pretrain/unassigned"


def labels(run, **extra):
    return {"alertname": "NodeDown", "run": run, "instance": "node7:9100", **extra}


@pytest.mark.parametrize("bad_run", ["llama ft 7!", "x" * 129, "run\x00id", ""])
def test_an_unusable_run_label_goes_to_the_catch_all_with_the_label_kept(webhook, project, bad_run):
    body = notification(am_alert(fingerprint="a", **labels("llama-ft-7")), am_alert(fingerprint="b", **labels(bad_run)),
                        am_alert(fingerprint="c", **labels("llama-ft-8")))
    response = webhook.post(body)
    assert response.status_code == 202, response.content
    answer = response.json()
    assert answer["accepted"] == {"alerts": 3, "events": 3, "ended": 0}
    assert [e["detail"]["labels"]["run"] for e in webhook.events("llama-ft-7")] == ["llama-ft-7"]
    assert len(webhook.events("llama-ft-8")) == 1
    if bad_run:  # an empty run label is the same as none: the catch-all, nothing to report
        [note] = answer["put_aside"]
        assert note["path"] == "alerts[1].labels.run" and note["stored_on"] == CATCH_ALL
        assert "not a run id" in note["message"]
        [event] = webhook.events(CATCH_ALL)
        assert event["detail"]["labels"]["run"] == bad_run.replace("\x00", "\ufffd")
    else:
        assert answer["put_aside"] == [] and len(webhook.events(CATCH_ALL)) == 1


def test_a_run_label_naming_another_projects_run_goes_to_the_catch_all(webhook, other_project):
    Run.objects.create(project=other_project, run_id="vision-run")
    response = webhook.post(notification(am_alert(**labels("vision-run")), am_alert(fingerprint="d", **labels("llama-ft-7"))))
    assert response.status_code == 202, response.content
    [note] = response.json()["put_aside"]
    assert note["path"] == "alerts[0].labels.run" and note["stored_on"] == CATCH_ALL and "another project" in note["message"]
    assert [e["detail"]["labels"]["run"] for e in webhook.events(CATCH_ALL)] == ["vision-run"]
    assert len(webhook.events("llama-ft-7")) == 1
    assert Run.objects.get(run_id="vision-run").events.count() == 0


@pytest.mark.parametrize(
    "field, value, path",
    [
        ("status", "burning", "alerts[1].status"),
        ("labels", ["not", "a", "map"], "alerts[1].labels"),
        ("annotations", "text", "alerts[1].annotations"),
        ("startsAt", "yesterday", "alerts[1].startsAt"),
        ("fingerprint", {"not": "text"}, "alerts[1].fingerprint"),
    ],
)
def test_a_malformed_alert_is_put_aside_and_the_others_stored(webhook, field, value, path):
    bad = am_alert(fingerprint="b", **labels("llama-ft-7"))
    bad[field] = value
    response = webhook.post(notification(am_alert(fingerprint="a", **labels("llama-ft-7")), bad))
    assert response.status_code == 202, response.content
    [note] = response.json()["put_aside"]
    assert note["path"] == path and note["stored_on"] is None and note["message"]
    assert response.json()["accepted"] == {"alerts": 2, "events": 1, "ended": 0}
    assert len(webhook.events("llama-ft-7")) == 1


def test_an_alert_that_is_not_an_object_is_put_aside(webhook):
    response = webhook.post(notification("GpuXidError", am_alert(**labels("llama-ft-7"))))
    assert response.status_code == 202, response.content
    assert [n["path"] for n in response.json()["put_aside"]] == ["alerts[0]"]
    assert len(webhook.events("llama-ft-7")) == 1


@pytest.mark.parametrize(
    "body, path",
    [
        (b"", ""),
        (b"{not json", ""),
        (b"[]", ""),
        (b'{"version": "3", "alerts": []}', "version"),
        (b'{"version": "4"}', "alerts"),
        (b'{"version": "4", "alerts": {"0": {}}}', "alerts"),
    ],
)
def test_a_body_that_is_not_a_notification_is_a_400_naming_the_field(webhook, body, path):
    before = stored_counts()
    response = webhook.post(body)
    assert response.status_code == 400, response.content
    assert response.json()["errors"][0]["path"] == path
    assert stored_counts() == before
