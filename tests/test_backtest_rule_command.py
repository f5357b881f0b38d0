"""`manage.py backtest_rule FILE.yaml`: the would-be alerts and the summary printed, nothing saved, bad files named."""
import json
from io import StringIO

import pytest
import yaml
from django.core.management import CommandError, call_command

from alerts.models import Alert, Rule
from tests.backtest_support import draft

pytestmark = pytest.mark.django_db


def backtest_rule(tmp_path, rule, *args):
    path = tmp_path / "rule.yaml"
    path.write_text(yaml.safe_dump(rule))
    out = StringIO()
    call_command("backtest_rule", str(path), *args, stdout=out)
    return out.getvalue()


def test_it_prints_the_alerts_a_draft_would_fire_and_the_summary(tmp_path, runs):
    out = backtest_rule(tmp_path, draft())
    lines = [line.split() for line in out.splitlines()]
    assert [(line[0], line[3]) for line in lines if line and line[0].startswith("spiky")] == [("spiky-a", "300"), ("spiky-b", "200")]
    assert "runs 3, runs with alerts 2, alerts 2, pages 2, predicted false alarms: no prediction" in out
    assert "wall-clock absence" in out
    assert (Rule.objects.count(), Alert.objects.count()) == (0, 0)


def test_runs_and_tags_narrow_it_and_json_gives_the_api_answer(tmp_path, runs):
    result = json.loads(backtest_rule(tmp_path, draft(), "--runs", "spiky-b", "calm", "--json"))
    assert (result["runs"], [a["run"] for a in result["would_fire"]]) == (2, ["spiky-b"])
    result = json.loads(backtest_rule(tmp_path, draft(), "--tags", "team=pretrain", "--json"))
    assert (result["runs"], [a["run"] for a in result["would_fire"]]) == (2, ["spiky-a"])


def test_a_bad_rule_is_refused_naming_the_field(tmp_path, runs):
    with pytest.raises(CommandError, match=r"params\.width"):
        backtest_rule(tmp_path, draft(params={"direction": "above", "width": -1}))
    with pytest.raises(CommandError, match="runs: no run nope"):
        backtest_rule(tmp_path, draft(), "--runs", "nope")
