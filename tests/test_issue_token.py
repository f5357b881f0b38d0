"""`manage.py issue_token <slug>` creates the project if missing and prints the token alone on stdout."""
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from ingest.models import Project, ProjectToken, hash_token

pytestmark = pytest.mark.django_db


def issue(*args, **kwargs):
    out, err = StringIO(), StringIO()
    call_command("issue_token", *args, stdout=out, stderr=err, **kwargs)
    return out.getvalue(), err.getvalue()


def test_prints_only_the_token_and_stores_only_its_hash(api):
    out, _ = issue("newproj", owner="Pretrain on-call <#pretrain-oncall>")
    lines = out.splitlines()
    assert len(lines) == 1 and lines[0].startswith("wl_")
    raw = lines[0]
    project = Project.objects.get(slug="newproj")
    assert (project.owner_name, project.owner_contact) == ("Pretrain on-call", "#pretrain-oncall")
    stored = ProjectToken.objects.get(project=project)
    assert stored.token_hash == hash_token(raw) and raw not in (stored.token_hash, stored.hint)
    response = api.post("/api/v1/ingest", {"run": {"id": "via-new-token"}}, format="json", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert response.status_code == 202


def test_second_token_for_an_existing_project_keeps_the_first_valid():
    first, _ = issue("p1")
    second, _ = issue("p1")
    assert first != second
    assert Project.objects.filter(slug="p1").count() == 1
    assert ProjectToken.objects.filter(project__slug="p1").count() == 2


def test_owner_without_a_contact_is_refused():
    with pytest.raises(CommandError, match="NAME <CONTACT>"):
        issue("p2", owner="just a name")
    assert not Project.objects.filter(slug="p2").exists()


def test_revoked_token_is_refused(api):
    out, _ = issue("p3")
    ProjectToken.objects.update(revoked_at="2026-01-01T00:00:00Z")
    response = api.post("/api/v1/ingest", {"run": {"id": "x"}}, format="json", HTTP_AUTHORIZATION=f"Bearer {out.strip()}")
    assert response.status_code == 401
