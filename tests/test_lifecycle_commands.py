"""`manage.py prune`, `delete_run` and `delete_project`: --yes skips the question; without it, anything but
"yes" keeps the data."""
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from ingest.models import Project, Run
from retention.models import RetentionPolicy
from tests.retention_support import age, fired_alert, log_entry, send_points, stored_points

pytestmark = pytest.mark.django_db


def run_command(*args, answer=None, monkeypatch=None):
    if answer is not None:
        monkeypatch.setattr("builtins.input", lambda prompt: answer)
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_prune_applies_retention_now(project, sender):
    run = send_points(sender, "old-run")
    age(run, 10)
    RetentionPolicy.objects.create(project=project, retention_days=7)
    out = run_command("prune")
    assert out.startswith("pretrain: ") and "1 runs archived" in out
    assert stored_points(run) == 0


def test_delete_run_with_yes(sender):
    fired_alert(send_points(sender, "doomed-run"))
    assert "doomed-run: deleted" in run_command("delete_run", "doomed-run", "--yes")
    assert not Run.objects.filter(run_id="doomed-run").exists()


def test_delete_run_asks_first(sender, monkeypatch):
    send_points(sender, "doomed-run")
    with pytest.raises(CommandError, match="not deleted"):
        run_command("delete_run", "doomed-run", answer="no", monkeypatch=monkeypatch)
    assert Run.objects.filter(run_id="doomed-run").exists()
    assert "deleted" in run_command("delete_run", "doomed-run", answer="yes", monkeypatch=monkeypatch)
    assert not Run.objects.filter(run_id="doomed-run").exists()


def test_delete_run_archives_a_logged_run(sender):
    run = send_points(sender, "logged-run")
    log_entry(run)
    assert "archived" in run_command("delete_run", "logged-run", "--yes")
    assert Run.objects.filter(run_id="logged-run").exists() and stored_points(run) == 0


def test_delete_project_with_fired_rules_with_yes(project, sender, monkeypatch):
    fired_alert(send_points(sender, "run-a"))
    with pytest.raises(CommandError):
        run_command("delete_project", "pretrain", answer="", monkeypatch=monkeypatch)
    assert Project.objects.filter(slug="pretrain").exists()
    assert "pretrain: deleted; 1 runs deleted" in run_command("delete_project", "pretrain", "--yes")
    assert not Project.objects.filter(slug="pretrain").exists()


def test_unknown_names_are_errors(db):
    with pytest.raises(CommandError, match="no run"):
        run_command("delete_run", "nope", "--yes")
    with pytest.raises(CommandError, match="no project"):
        run_command("delete_project", "nope", "--yes")
