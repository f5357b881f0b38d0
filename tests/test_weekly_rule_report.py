"""Each owner's weekly rule report goes out by Django's mail backend (locmem here) and is kept in the console."""
from celery.schedules import crontab
from django.conf import settings
from django.core import mail

from alerts.models import ChangeKind
from audit.models import SentReport
from audit.report import Period, report
from audit.tasks import send_weekly_reports
from opsconsole.models import Membership, Role
from tests.audit_support import PERIOD, change, fire, owned_rule
from tests.factories import client_for, make_rule


def test_beat_sends_them_on_monday_morning():
    entry = settings.CELERY_BEAT_SCHEDULE["weekly-rule-reports"]
    assert entry["task"] == "audit.tasks.send_weekly_reports"
    assert entry["schedule"] == crontab(minute=0, hour=7, day_of_week="mon")


def test_one_email_per_owner_kept_as_a_sent_report(project, owner, teammate, django_user_model):
    owner.email = "olivia@example.org"
    owner.save()
    teammate.email = "tariq@example.org"  # a viewer: not a recipient of the team's report
    teammate.save()
    admin_without_mail = django_user_model.objects.create_user("nomail")
    Membership.objects.create(user=admin_without_mail, project=project, role=Role.RULE_ADMIN)
    team_rule = make_rule(project, "loss-spike")  # owner "Pretrain on-call <#pretrain-oncall>": no e-mail in it
    grad_rule = owned_rule(project, "grad-high", "Grad team <grad@example.org>", kind="threshold")
    fire(team_rule, 1)
    change(fire(grad_rule, 2), ChangeKind.ACKNOWLEDGED, 3, by=owner)

    assert send_weekly_reports(until=PERIOD.until) == 2

    by_recipients = {tuple(m.to): m for m in mail.outbox}
    assert sorted(by_recipients) == [("grad@example.org",), ("olivia@example.org",)]
    team_mail = by_recipients[("olivia@example.org",)]
    assert team_mail.subject == "[Warning Light] weekly rule report: pretrain · Pretrain on-call <#pretrain-oncall>"
    assert "loss-spike: 1 alert, 0 triaged" in team_mail.body and "FLAG never triaged: 1 alert, none triaged" in team_mail.body
    assert "grad-high" not in team_mail.body
    assert "grad-high: 1 alert, 1 triaged" in by_recipients[("grad@example.org",)].body

    kept = {s.owner: s for s in SentReport.objects.all()}
    assert sorted(kept) == ["Grad team <grad@example.org>", "Pretrain on-call <#pretrain-oncall>"]
    grad = kept["Grad team <grad@example.org>"]
    assert (grad.since, grad.until, grad.recipients) == (PERIOD.since, PERIOD.until, ["grad@example.org"])
    assert grad.body == by_recipients[("grad@example.org",)].body
    assert grad.report == report(project, Period(PERIOD.since, PERIOD.until), grad.owner)


def test_the_sent_reports_page_lists_them_for_members_only(project, owner, teammate, outsider):
    make_rule(project, "loss-spike")
    send_weekly_reports(until=PERIOD.until)
    sent = SentReport.objects.get()
    listing = client_for(teammate).get("/reports/sent/").content.decode()
    assert f'data-report="{sent.pk}"' in listing
    assert client_for(teammate).get(f"/reports/sent/{sent.pk}/").status_code == 200
    assert f'data-report="{sent.pk}"' not in client_for(outsider).get("/reports/sent/").content.decode()
    assert client_for(outsider).get(f"/reports/sent/{sent.pk}/").status_code == 404


def test_no_recipient_still_keeps_the_report(project):
    make_rule(project, "loss-spike")  # nobody in the project has an e-mail
    send_weekly_reports(until=PERIOD.until)
    assert mail.outbox == []
    assert SentReport.objects.get().recipients == []
