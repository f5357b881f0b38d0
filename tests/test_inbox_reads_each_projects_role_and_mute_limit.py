"""The inbox reads who may act and how long a mute may last for every project on its page at once: each row still
follows its own project's role (on-call here, viewer there) and its own project's longest mute, and the page makes
the same number of queries for alerts of one project or of three."""
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from alerts.models import MuteSettings
from ingest.models import Project
from opsconsole.models import Membership, Role
from tests.factories import client_for, make_alert, make_rule

pytestmark = pytest.mark.django_db


def row(html, alert) -> str:
    return re.search(rf'<tr id="alert-{alert.pk}".*?</tr>', html, re.S).group(0)


def test_each_row_follows_its_projects_role_and_mute_limit(django_user_model, project, other_project):
    user = django_user_model.objects.create_user("mira")
    Membership.objects.create(user=user, project=project, role=Role.ONCALL)
    Membership.objects.create(user=user, project=other_project, role=Role.VIEWER)
    MuteSettings.objects.create(project=project, max_duration_hours=48)
    here = make_alert(make_rule(project, kind="band"), "run-a")
    there = make_alert(make_rule(other_project, kind="band"), "run-b")
    html = client_for(user).get("/inbox/").content.decode()
    assert f'id="resolve-{here.pk}"' in row(html, here) and 'data-max="2 days"' in row(html, here)
    assert "read only" in row(html, there) and f'id="resolve-{there.pk}"' not in html


def test_alerts_of_three_projects_cost_the_queries_of_one(django_user_model, project):
    user = django_user_model.objects.create_user("mira")
    client = client_for(user)

    def add_project(slug):
        p = project if slug == project.slug else Project.objects.create(slug=slug)
        Membership.objects.get_or_create(user=user, project=p, defaults={"role": Role.ONCALL})
        MuteSettings.objects.get_or_create(project=p)
        make_alert(make_rule(p, kind="band"), f"{slug}-run")

    def queries():
        with CaptureQueriesContext(connection) as captured:
            assert client.get("/inbox/").status_code == 200
        return len(captured)

    add_project(project.slug)
    one = queries()
    add_project("vision")
    add_project("speech")
    assert queries() == one
