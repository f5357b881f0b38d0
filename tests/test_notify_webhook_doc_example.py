"""The webhook body documented in docs/notifications.md is what the console sends: the same fields, and for its
non-finite gradient incident the magnitude a nonfinite rule records (the count of non-finite points in a row,
a number), never "NaN"."""
import json
import re
from pathlib import Path

from django.conf import settings

from tests.factories import make_rule
from tests.notify_support import make_channel, post_points

DOC = Path(settings.BASE_DIR) / "docs" / "notifications.md"


def documented_body():
    text = DOC.read_text()
    section = text[text.index("### The webhook body"):]
    return json.loads(re.search(r"```json\n(.*?)```", section, re.S).group(1))


def test_the_documented_webhook_body_is_the_one_sent_for_a_nonfinite_incident(project, sender, receiver):
    doc = documented_body()
    make_rule(project, name=doc["rule"], kind=doc["rule_kind"], scope={"metrics": [doc["metric"]]},
              persistence={"points": 1, "resolve_points": 3}, response=doc["severity"])
    make_channel(project, url=receiver.url)
    steps = range(doc["step"], doc["step"] + 3)
    post_points(sender, doc["run_id"], [{"step": s, "metric": doc["metric"], "component": doc["component"], "value": "NaN"}
                                        for s in steps])
    [sent] = [json.loads(r["body"]) for r in receiver.requests]

    assert set(sent) == set(doc) and set(sent["labels"]) == set(doc["labels"])
    # A nonfinite rule's magnitude counts the non-finite points in a row (three here, as in the example): a number.
    for field in ("version", "event", "rule", "rule_kind", "severity", "component", "metric", "step", "magnitude",
                  "magnitude_unit", "labels"):
        expected = {**doc["labels"], "incident": str(sent["incident_id"])} if field == "labels" else doc[field]
        assert sent[field] == expected, field
    assert sent["summary"].startswith(f"{doc['rule']} on run {doc['run_id']}, {doc['component']}, at step {doc['step']}")
