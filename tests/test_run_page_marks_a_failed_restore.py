"""The run page's Attempts table marks an attempt the chronicle calls a failed restore (a numeric alert right
after it resumed), and only that one."""
import re

import pytest

from tests.factories import client_for, make_rule

pytestmark = pytest.mark.django_db


def send(sender, steps, *, restart=False, nan_at=None):
    body = {"run": {"id": "seed4"}, "points": [{"step": s, "metric": "loss", "value": "NaN" if s == nan_at else 2.0 - s / 1000}
                                               for s in steps]}
    if restart:
        body["phases"] = [{"step": steps[0], "phase": "restart"}]
    assert sender.post(body).status_code == 202


def test_the_attempts_table_marks_the_failed_restore(sender, project, owner):
    make_rule(project, "loss-nonfinite", kind="nonfinite", scope={"metrics": ["loss"]}, persistence={"points": 1, "resolve_points": 3})
    send(sender, range(0, 51))
    send(sender, range(51, 201), restart=True)  # a benign restart
    send(sender, range(201, 221), restart=True, nan_at=204)  # resumed, and the loss went NaN right after
    html = client_for(owner).get("/runs/seed4/").content.decode()
    rows = dict(re.findall(r'<tr[^>]*data-attempt="(\d+)">(.*?)</tr>', html, re.S))
    assert sorted(rows) == ["1", "2", "3"]
    assert "failed restore" in rows["3"] and "loss-nonfinite" in rows["3"]
    assert "failed restore" not in rows["1"] + rows["2"]
