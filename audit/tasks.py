"""The audit app's periodic tasks: check each rule's diagnostic link, send each owner's weekly rule report."""
import logging
import urllib.error
import urllib.request
from urllib.parse import urlencode

from celery import shared_task
from django.conf import settings
from django.core.mail import send_mail
from django.urls import reverse
from django.utils import timezone

from alerts.models import Rule
from alerts.starter import console_link
from audit.models import LinkCheck, SentReport
from audit.report import EMAIL_RE, Period, report
from ingest.models import Project
from opsconsole.models import Membership, Role

log = logging.getLogger(__name__)


def probe(url: str, timeout: float) -> tuple[bool, int | None, str]:
    """(answers, status code, error): HEAD, then GET when HEAD is refused (some servers answer HEAD with 405).
    A 2xx or 3xx answer counts; anything else, a refused connection or a timeout does not."""
    last = (False, None, "")
    for method in ("HEAD", "GET"):
        request = urllib.request.Request(url, method=method, headers={"User-Agent": "warning-light-link-check"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:  # noqa: S310 (http(s) only, governance)
                return True, answer.status, ""
        except urllib.error.HTTPError as exc:
            last = (False, exc.code, "")
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            return False, None, f"{type(reason).__name__}: {reason}"[:500]
    return last


def check_link(rule: Rule, *, timeout: float | None = None) -> LinkCheck:
    """Check one rule's diagnostic link and keep the result as a row. A link to one of this console's runbook
    pages (alerts/starter.py console_link turns it into a path here) answers when the runbook exists."""
    url = rule.diagnostic_url
    local = console_link(url)
    if local.startswith("/"):
        ok, code, error = True, 200, ""
    else:
        ok, code, error = probe(url, timeout or settings.LINK_CHECK_TIMEOUT_SECONDS)
    return LinkCheck.objects.create(rule=rule, url=url, ok=ok, status_code=code, error=error, checked_at=timezone.now())


@shared_task
def check_diagnostic_links():
    checked = 0
    for rule in Rule.objects.filter(enabled=True).order_by("pk"):
        check_link(rule)
        checked += 1
    return checked


def recipients(project, owner: str) -> list[str]:
    """The owner's e-mail when the owner text holds one; else the project's rule admins who have an e-mail."""
    emails = EMAIL_RE.findall(owner)
    if emails:
        return sorted(set(emails))
    return sorted(set(Membership.objects.filter(project=project, role=Role.RULE_ADMIN, user__is_active=True)
                      .exclude(user__email="").values_list("user__email", flat=True)))


def report_text(data: dict) -> str:
    lines = [f"Rule report for {data['project']}, owner {data['owner']}, {data['since']} to {data['until']}.", ""]
    for row in data["rules"]:
        rate = "—" if row["false_alarm_rate"] is None else f"{row['false_alarm_rate']:.0%}"
        lines.append(f"{row['rule']}: {row['fires']} alert{'' if row['fires'] == 1 else 's'}, {row['triaged']} triaged, false alarms {row['false_alarms']} "
                     f"of {row['verdicts']} ({rate}), {row['mutes']} mute{'' if row['mutes'] == 1 else 's'}")
        lines.extend(f"  FLAG {f['words']}: {f['figure']}" for f in row["flags"])
    query = urlencode({"project": data["project"], "owner": data["owner"], "since": data["since"], "until": data["until"]})
    lines += ["", f"The full report: {settings.CONSOLE_URL}{reverse('console:reports-rules')}?{query}"]
    return "\n".join(lines)


def send_owner_report(project, owner: str, period: Period) -> SentReport:
    data = report(project, period, owner)
    to = recipients(project, owner)
    subject = f"[Warning Light] weekly rule report: {project.slug} · {owner}"[:300]
    body = report_text(data)
    if to:
        send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, to)
    else:
        log.warning("weekly rule report for %s / %s: no recipient (kept in the console only)", project.slug, owner)
    return SentReport.objects.create(project=project, owner=owner, since=period.since, until=period.until, recipients=to,
                                     subject=subject, body=body, report=data, sent_at=timezone.now())


@shared_task
def send_weekly_reports(until=None):
    """One report per (project, owner) of the rules: the week before `until` (now by default)."""
    period = Period.week_before(until or timezone.now())
    sent = 0
    for project in Project.objects.order_by("slug"):
        for owner in sorted(set(Rule.objects.filter(project=project).values_list("owner", flat=True))):
            send_owner_report(project, owner, period)
            sent += 1
    return sent
