"""Debian's real `prometheus` (2.42) scraping a live console's /metrics with METRICS_TOKEN, and the repository's
alerting rule (deploy/prometheus/alerts.yml, the one docs/operations.md shows) firing while no worker evaluates.

The rule is loaded as it is written, its threshold and `for` shortened to seconds so the test takes seconds.
`bin/test` installs the package when it is missing; under CI a missing binary fails this test instead of
skipping it.
"""
import re
from pathlib import Path

import httpx
import yaml

from alerts.tasks import evaluate_batch
from ingest.models import BatchReceipt
from opsconsole.celery import app as celery_app
from tests.browser import console_server  # noqa: F401  (fixture)
from tests.process_support import PROMETHEUS, debian_server, wait_for

RULES = Path(__file__).resolve().parent.parent / "deploy" / "prometheus" / "alerts.yml"
METRICS_TOKEN = "prometheus-scrapes-0123456789abcdef"


def rules_in_seconds() -> str:
    """The repository's rules, EvaluationBacklog's threshold at 3 s and its `for` at 1 s."""
    config = yaml.safe_load(RULES.read_text())
    [rule] = [r for group in config["groups"] for r in group["rules"] if r.get("alert") == "EvaluationBacklog"]
    assert "warninglight_evaluation_oldest_unevaluated_seconds" in rule["expr"]
    rule["expr"], replaced = re.subn(r">\s*\d+(\.\d+)?\s*$", "> 3", rule["expr"].strip())
    assert replaced == 1, rule["expr"]
    rule["for"] = "1s"
    return yaml.safe_dump(config)


def running_prometheus(target_port, tmp_path):
    (tmp_path / "alerts.yml").write_text(rules_in_seconds())
    (tmp_path / "metrics-token").write_text(METRICS_TOKEN)
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(tmp_path / "alerts.yml")],
        "scrape_configs": [{
            "job_name": "warning-light",
            "authorization": {"credentials_file": str(tmp_path / "metrics-token")},
            "static_configs": [{"targets": [f"127.0.0.1:{target_port}"]}],
        }],
    }
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    return debian_server(PROMETHEUS, lambda port: [
        f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"], tmp_path, timeout=30)


def backlog_alerts(prometheus):
    alerts = prometheus.get("/api/v1/alerts").json()["data"]["alerts"]
    return [a["state"] for a in alerts if a["labels"].get("alertname") == "EvaluationBacklog"]


def target_health(prometheus):
    targets = prometheus.get("/api/v1/targets").json()["data"]["activeTargets"]
    return [(t["health"], t["lastError"]) for t in targets]


def test_the_backlog_alert_fires_while_no_worker_evaluates_and_resolves_after(console_server, token, settings, tmp_path,  # noqa: F811
                                                                             monkeypatch):
    settings.METRICS_TOKEN = METRICS_TOKEN
    with running_prometheus(console_server.port, tmp_path) as prometheus:
        wait_for("Prometheus to scrape the console with the token", lambda: target_health(prometheus) == [("up", "")])
        assert backlog_alerts(prometheus) == []

        # No worker: the batch is handed to the queue, and nobody takes it. (Handed to nowhere: a message left on
        # the suite's broker would be counted by the queue's own tests.)
        celery_app.conf.task_always_eager = False
        monkeypatch.setattr(evaluate_batch, "apply_async", lambda *args, **kwargs: None)
        answer = httpx.post(f"{console_server.url}/api/v1/ingest", headers={"Authorization": f"Bearer {token}"},
                            json={"run": {"id": "backlog-1"}, "points": [{"step": 1, "metric": "loss", "value": 2.0}]})
        assert answer.status_code == 202, answer.text
        receipt = BatchReceipt.objects.get(run__run_id="backlog-1")
        assert receipt.evaluated_at is None

        wait_for("EvaluationBacklog to fire", lambda: backlog_alerts(prometheus) == ["firing"], timeout=30)

        # A worker comes back and evaluates it: the backlog empties and the alert ends.
        # .result, not .get(): get() refuses to run when an earlier test in this process left a task context.
        assert evaluate_batch.apply(args=(receipt.pk,)).result is True
        wait_for("EvaluationBacklog to resolve", lambda: backlog_alerts(prometheus) == [], timeout=20)


def test_the_docs_show_the_rules_this_test_loads():
    docs = (Path(__file__).resolve().parent.parent / "docs" / "operations.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", docs, re.S)
    assert RULES.read_text() in blocks


def test_the_readmes_backlog_rule_is_the_rule_file_s():
    """The README shows EvaluationBacklog in short: its expression and `for` are the file's, which the test above
    loads into Prometheus, so the front door never shows a rule that was not tried."""
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    rule = yaml.safe_load(RULES.read_text())["groups"][0]["rules"][0]
    assert rule["alert"] == "EvaluationBacklog"
    assert f"expr: {rule['expr']}" in readme
    assert f"for: {rule['for']}" in readme
