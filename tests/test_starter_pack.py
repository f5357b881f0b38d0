"""Every new project starts with the governed starter rule pack; its runbooks are pages of the console."""
from io import StringIO
from urllib.parse import urlsplit

import numpy as np
import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import Client
from django.utils.html import escape
from rest_framework.test import APIClient

from alerts.models import Rule, RuleRevision
from alerts.starter import STARTER_RULES, install_starter_pack
from ingest.models import Project
from opsconsole.models import Membership, Role

pytestmark = pytest.mark.django_db
VISION = "Vision on-call <#vision-oncall>"
NAMES = sorted(spec["name"] for spec in STARTER_RULES)


def issue(*args):
    out, err = StringIO(), StringIO()
    call_command("issue_token", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def rule_names(slug):
    return sorted(Rule.objects.filter(project__slug=slug).values_list("name", flat=True))


def test_issue_token_with_an_owner_installs_every_starter_rule_governed():
    issue("newproj", "--owner", VISION)
    rules = {r.name: r for r in Rule.objects.filter(project__slug="newproj")}
    assert sorted(rules) == NAMES
    for spec in STARTER_RULES:
        rule = rules[spec["name"]]
        assert rule.owner == VISION
        assert rule.diagnostic_url == f"{settings.CONSOLE_URL}/runbooks/{spec['name']}/"
        assert (rule.kind, rule.scope, rule.persistence, rule.permitted_response) == (
            spec["kind"], spec["scope"], spec["persistence"], spec["permitted_response"])
        assert list(RuleRevision.objects.filter(rule=rule).values_list("action", "source")) == [("created", "starter")]
        rule.full_clean()  # the governance every other path is held to


def test_issue_token_again_does_not_duplicate_the_pack():
    issue("newproj", "--owner", VISION)
    issue("newproj", "--owner", VISION)
    issue("newproj")
    assert rule_names("newproj") == NAMES
    assert RuleRevision.objects.filter(project__slug="newproj").count() == len(NAMES)


def test_a_starter_rule_deleted_by_a_rule_admin_stays_deleted(django_user_model):
    issue("newproj", "--owner", VISION)
    admin = django_user_model.objects.create_user("vera", password="pw-vera")
    Membership.objects.create(user=admin, project=Project.objects.get(slug="newproj"), role=Role.RULE_ADMIN)
    api = APIClient()
    api.force_login(admin)
    spike = Rule.objects.get(project__slug="newproj", name="loss-spike")
    assert api.delete(f"/api/v1/rules/{spike.pk}/").status_code == 204

    issue("newproj", "--owner", VISION)
    assert rule_names("newproj") == [n for n in NAMES if n != "loss-spike"]


def test_a_project_without_an_owner_gets_no_rules_and_is_told_why_until_it_has_one():
    out, err = issue("newproj")
    assert out.strip().startswith("wl_")
    assert rule_names("newproj") == []
    assert "no owner" in err and "--owner" in err

    _, err = issue("newproj", "--owner", VISION)
    assert rule_names("newproj") == NAMES
    assert set(Rule.objects.filter(project__slug="newproj").values_list("owner", flat=True)) == {VISION}
    assert "starter rule pack" in err


@pytest.mark.parametrize("spec", STARTER_RULES, ids=[s["name"] for s in STARTER_RULES])
def test_every_runbook_link_is_a_public_page_of_the_console(spec):
    issue("newproj", "--owner", VISION)
    url = Rule.objects.get(project__slug="newproj", name=spec["name"]).diagnostic_url
    response = Client().get(urlsplit(url).path)  # anonymous: the link is opened from a chat message
    assert response.status_code == 200
    page = response.content.decode()
    assert escape(spec["runbook"]["title"]) in page
    assert spec["name"] in page


def test_an_unknown_runbook_is_not_found():
    assert Client().get("/runbooks/no-such-rule/").status_code == 404


# The pack against realistic runs


def training_run(spike=None, nan_at=None, seed=7):
    """300 steps: warmup 0..49, steady from 50, an eval phase at 150..154 with the loss ×1.5, steady again from 155."""
    rng = np.random.default_rng(seed)
    steps = np.arange(300)
    loss = 2.5 * np.exp(-steps / 2000) + rng.normal(0, 0.01, len(steps))
    loss[:50] += 4.0 * np.exp(-steps[:50] / 10)  # warmup: falling fast from a high start
    loss[150:155] *= 1.5
    if spike is not None:
        loss[spike:spike + 5] *= 3
    values = [float(v) for v in loss]
    if nan_at is not None:
        values[nan_at] = "NaN"
    phases = [{"step": 0, "phase": "warmup"}, {"step": 50, "phase": "steady"}, {"step": 150, "phase": "eval"},
              {"step": 155, "phase": "steady"}]
    return phases, [{"step": int(s), "metric": "loss", "value": v} for s, v in zip(steps, values)]


def send(sender, run_id, phases, points, batch=25):
    for start in range(0, len(points), batch):
        chunk = points[start:start + batch]
        lo, hi = chunk[0]["step"], chunk[-1]["step"]
        sender.post({"run": {"id": run_id}, "phases": [p for p in phases if lo <= p["step"] <= hi], "points": chunk})
    return sender.get("/api/v1/alerts/", run=run_id).json()["results"]


@pytest.fixture
def pack(project):
    rules = install_starter_pack(project)
    assert sorted(r.name for r in rules) == NAMES
    return rules


def test_a_healthy_run_with_warmup_and_an_eval_bump_raises_nothing(sender, pack):
    assert send(sender, "healthy", *training_run()) == []


def test_a_nan_loss_raises_nonfinite_loss(sender, pack):
    alerts = send(sender, "nan", *training_run(nan_at=220))
    assert [(a["rule"]["name"], a["metric"], a["step"]) for a in alerts] == [("nonfinite-loss", "loss", 220)]
    assert alerts[0]["rule"]["owner"] == "Pretrain on-call <#pretrain-oncall>"


def test_a_loss_spike_in_steady_raises_loss_spike_within_three_steps(sender, pack):
    alerts = send(sender, "spike", *training_run(spike=200))
    assert [a["rule"]["name"] for a in alerts] == ["loss-spike"]
    [alert] = alerts
    assert alert["step"] == 200
    assert 200 <= alert["fired_step"] <= 203
