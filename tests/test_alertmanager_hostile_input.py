"""Hostile and odd Alertmanager input is stored sanely or put aside with its path: never a 500.

Before, each of these was a server error on PostgreSQL (which refuses NUL in
text and jsonb) and some on SQLite too: NUL in labels, annotations and
fingerprints; bare NaN / 1e400 in annotations; a non-numeric or huge `step`
label; label or annotation values nested ~1,000 deep (RecursionError).

What the webhook does instead (docs/alertmanager.md):
- NUL in any label or annotation name or value, or the fingerprint, is stored
  as U+FFFD (the same on every notification, so a resolved alert still finds
  the event it ends);
- label and annotation values are text: numbers, booleans and null are stored
  as their text (NaN, 1e400 → "NaN", "Infinity"); a nested object or array puts
  that alert aside (not stored), named by its path;
- a `step` label that is not an integer from 0 to 2^53−1 is ignored (the
  event goes at the run's latest step) and named in the answer.
"""
import json

import pytest

from tests.alertmanager_support import am_alert, notification

pytestmark = pytest.mark.django_db

NUL = "\x00"
DEPTH = 1000  # orjson parses up to 1,024; storing it as jsonb recursed past Python's limit
DEEP = "[" * DEPTH + "]" * DEPTH


def body_text(alerts, raw=None):
    """JSON text as a hostile sender writes it: bare NaN tokens, 1e400, and placeholders swapped for raw text."""
    text = json.dumps(notification(*alerts))  # json writes NaN as a bare token
    for placeholder, value in (raw or {}).items():
        text = text.replace(f'"{placeholder}"', value)
    return text.encode()


def hostile_alerts():
    run = {"run": "hostile", "instance": "node1:9100"}
    return [
        am_alert(fingerprint=f"fp{NUL}0", annotations={f"sum{NUL}mary": f"XID{NUL}79"},
                 **{"alertname": f"Gpu{NUL}Xid", f"na{NUL}me": f"va{NUL}lue", **run}),
        am_alert(fingerprint="fp1", annotations={"value": float("nan")}, alertname="NanValue", **run),
        am_alert(fingerprint="fp2", annotations={"value": "@HUGE@", "summary": "@HUGE@"}, alertname="HugeValue", **run),
        am_alert(fingerprint="fp3", alertname="WordStep", step="forty", **run),
        am_alert(fingerprint="fp4", alertname="HugeStep", step="9" * 30, **run),
        am_alert(fingerprint="fp5", alertname="GoodStep", step="12", **run),
        am_alert(fingerprint="fp6", alertname="Scalars", port=9400, up=True, gone=None, **run),
        am_alert(fingerprint="fp7", alertname="SuperscriptStep", step="²", **run),
    ]


def deep_alerts():
    run = {"run": "hostile", "instance": "node1:9100"}
    return [
        am_alert(fingerprint="fp8", alertname="DeepLabel", deep="@DEEP@", **run),
        am_alert(fingerprint="fp9", annotations={"deep": "@DEEP@"}, alertname="DeepAnnotation", **run),
        am_alert(fingerprint="fp10", alertname="Shallow", **run),
    ]


def check_hostile_notification_is_stored_sanely(webhook, sender):
    assert sender.post({"run": {"id": "hostile"}, "points": [{"step": 40, "metric": "loss", "value": 1.0}]}).status_code == 202
    response = webhook.post(body_text(hostile_alerts(), {"@HUGE@": "1e400"}))
    assert response.status_code == 202, response.content[:500]
    answer = response.json()
    assert answer["accepted"] == {"alerts": 8, "events": 8, "ended": 0}
    notes = {n["path"]: n for n in answer["put_aside"]}
    assert sorted(notes) == ["alerts[3].labels.step", "alerts[4].labels.step", "alerts[7].labels.step"]
    assert notes["alerts[3].labels.step"]["stored_on"] == "hostile" and "latest step" in notes["alerts[3].labels.step"]["message"]

    events = {e["detail"]["labels"]["alertname"]: e for e in webhook.events("hostile")}
    assert sorted(events) == ["GoodStep", "Gpu\ufffdXid", "HugeStep", "HugeValue", "NanValue", "Scalars", "SuperscriptStep", "WordStep"]
    nul = events["Gpu\ufffdXid"]
    assert nul["fingerprint"] == "fp\ufffd0" and nul["component"] == "node1:9100"
    assert nul["detail"]["labels"]["na\ufffdme"] == "va\ufffdlue"
    assert nul["detail"]["annotations"] == {"sum\ufffdmary": "XID\ufffd79"}
    assert events["NanValue"]["magnitude"] == "NaN" and events["NanValue"]["detail"]["annotations"]["value"] == "NaN"
    assert events["HugeValue"]["magnitude"] == "Infinity" and events["HugeValue"]["detail"]["annotations"]["summary"] == "Infinity"
    assert [events[name]["step"] for name in ("WordStep", "HugeStep", "SuperscriptStep", "GoodStep")] == [40, 40, 40, 12]
    assert events["Scalars"]["detail"]["labels"].items() >= {"port": "9400", "up": "true", "gone": ""}.items()

    # The fingerprint with a NUL is stored the same way each time, so its resolved notification ends it.
    resolved = am_alert("resolved", fingerprint=f"fp{NUL}0", ends="2026-11-29T10:05:00Z",
                        **{"alertname": f"Gpu{NUL}Xid", "run": "hostile", "instance": "node1:9100"})
    response = webhook.post(body_text([resolved]))
    assert response.status_code == 202 and response.json()["accepted"]["ended"] == 1

    # Nested ~1,000 deep (no NaN token in this body, so the fast parser takes it whole).
    response = webhook.post(body_text(deep_alerts(), {"@DEEP@": DEEP}))
    assert response.status_code == 202, response.content[:500]
    assert response.json()["accepted"] == {"alerts": 3, "events": 1, "ended": 0}
    notes = response.json()["put_aside"]
    assert [(n["path"], n["stored_on"]) for n in notes] == [("alerts[0].labels.deep", None), ("alerts[1].annotations.deep", None)]
    assert "text" in notes[0]["message"]


def test_hostile_notification_is_stored_sanely(webhook, sender):
    check_hostile_notification_is_stored_sanely(webhook, sender)


@pytest.mark.postgres
def test_hostile_notification_is_stored_sanely_on_postgresql(webhook, sender, vendor):
    assert vendor == "postgresql"
    check_hostile_notification_is_stored_sanely(webhook, sender)


@pytest.mark.parametrize("field", ["startsAt", "endsAt", "generatorURL"])
@pytest.mark.parametrize("value", [f"2026-11-29T10:00:00Z{NUL}", "@DEEP@"], ids=["nul", "nested"])
def test_nul_or_nesting_in_the_alerts_own_fields(webhook, field, value):
    alert = am_alert(alertname="Odd", run="hostile")
    alert[field] = value
    response = webhook.post(body_text([alert], {"@DEEP@": DEEP}))
    assert response.status_code == 202, response.content[:500]
    put_aside = [n["path"] for n in response.json()["put_aside"]]
    if field == "generatorURL" and value != "@DEEP@":  # text like any other: stored with U+FFFD
        assert put_aside == []
        assert webhook.events("hostile")[0]["detail"]["generatorURL"] == "2026-11-29T10:00:00Z\ufffd"
    else:  # not a time, or not text: nothing to store it by
        assert put_aside == [f"alerts[0].{field}"]
