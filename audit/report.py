"""The rule audit report: per rule of a project, for a period [since, until), every figure and flag.

The figures of the period's alerts are computed by the database (audit/figures.py), equal to the definitions
below read alert by alert in Python (tests/test_audit_report_matches_python.py).

One function (`report_rows`) builds the rows; the console page, the printable page, the JSON and the CSV all
show them, so the formats cannot disagree.

Definitions (docs/alerting.md, "Keeping rules honest", repeats them):
- fires: the rule's alerts with fired_at in the period; incidents: the distinct incidents those alerts belong to.
- alerts per run: fires / the distinct runs they fired on.
- triaged: an alert with an acknowledged or verdict AlertChange row, a resolved row made by a person (`by` set),
  or reviewed_at set.
- verdicts: the latest verdict AlertChange row of each of the period's alerts (the alert's own `verdict` field
  when it has none); false-alarm rate = false_alarm / (false_alarm + actionable), with a 95% Wilson interval.
- time to acknowledge: fired_at -> the alert's first acknowledged row; time to resolve: fired_at -> resolved_at;
  medians over the alerts that have one, in seconds.
- mutes: the rule's Mute rows whose [created_at, ended_at or expires_at) overlaps the period (whatever their
  scope); muted hours = the union of those intervals within the period; muted share = the part of the rule's
  firing time (the union of its alerts' [fired_at, resolved_at or until), within the period) that the mutes
  cover.
"""
import re
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.db.models import OuterRef, Q, Subquery

from alerts.backtest import wilson
from alerts.fatigue import false_pages_by_rule
from alerts.models import Alert, Mute, MuteEndReason, Rule, RuleRevision
from audit.figures import AlertFigures, alert_figures, clip, total_seconds, union
from audit.models import LinkCheck
from opsconsole.models import Membership
from opsconsole.templatetags.times import when_text

FALSE_ALARM_FLAG_RATE = 0.5  # flagged above this rate ...
FALSE_ALARM_FLAG_MIN_VERDICTS = 5  # ... when it rests on at least this many verdicts
MUTED_FLAG_SHARE = 0.25  # flagged when muted more than this share of its firing time ...
# ... once that share rests on some history: its alerts of the period were open this long in all, and the first of
# them fired at least this long before `until`. One alert muted a few minutes after it fired is "muted 100%" of a
# few minutes: a mute doing its job, not a rule people keep silencing.
MUTED_FLAG_MIN_FIRING_HOURS = 1
MUTED_FLAG_MIN_HISTORY_HOURS = 24
SILENT_DAYS = 90  # flagged when it has not fired in this many days before `until` (and existed all that time)
EDITS_FLAG = 5  # flagged when edited at least this many times in the period
EMAIL_RE = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
USERNAME_RE = re.compile(r"[\w.@+-]{1,150}")  # Django's username characters


class Flag:
    FALSE_ALARMS = "false_alarms"
    MUTED = "muted"
    NEVER_TRIAGED = "never_triaged"
    SILENT = "silent"
    OWNER_GONE = "owner_gone"
    LINK_DOWN = "link_down"
    EDITED_OFTEN = "edited_often"
    MUTED_OVER_LIMIT = "muted_over_limit"


# A flag's name for people (the snake_case name stays the CSV's and the API's key).
FLAG_WORDS = {
    Flag.FALSE_ALARMS: "false alarms", Flag.MUTED: "muted", Flag.NEVER_TRIAGED: "never triaged", Flag.SILENT: "silent",
    Flag.OWNER_GONE: "owner gone", Flag.LINK_DOWN: "link down", Flag.EDITED_OFTEN: "edited often",
    Flag.MUTED_OVER_LIMIT: "muted over the limit",
}


@dataclass(frozen=True)
class Period:
    since: datetime
    until: datetime

    @classmethod
    def week_before(cls, until: datetime) -> "Period":
        return cls(days_before(until, 7), until)


def days_before(moment: datetime, days: int) -> datetime:
    """`moment` less `days` days, or the earliest datetime when that would fall before year 1."""
    try:
        return moment - timedelta(days=days)
    except OverflowError:
        return datetime.min.replace(tzinfo=moment.tzinfo)


def _rate(k, n):
    return k / n if n else None


def mute_end(mute) -> datetime:
    return mute.ended_at or mute.expires_at


def owner_users(owner_text: str, users):
    """The users (of `users`: the project's members) an owner text names: the text (trimmed) equals a username, or
    an e-mail address in it equals a user's e-mail; case-insensitive. A team name ("Pretrain on-call
    <#pretrain-oncall>") names nobody."""
    text = owner_text.strip().lower()
    emails = {e.lower() for e in EMAIL_RE.findall(owner_text)}
    return [u for u in users if u.get_username().lower() == text or (u.email and u.email.lower() in emails)]


def changed_keys(before: dict | None, after: dict) -> list[str]:
    if before is None:
        return []
    return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))


def names_a_person(owner_text: str) -> bool:
    """An owner text that can only be one person's: an e-mail address, or a single word shaped like a username.
    A team's description ("Pretrain on-call <#pretrain-oncall>") is not."""
    text = owner_text.strip()
    return bool(EMAIL_RE.search(text)) or bool(USERNAME_RE.fullmatch(text))


def rule_figures(rule: Rule, period: Period, *, members, figures: AlertFigures, mutes, last, revisions, link,
                 false_pages: int = 0, first=None) -> dict:
    """Every figure and flag of one rule for the period, from what report_rows read for every rule at once: the
    alerts' figures (audit/figures.py), the rule's mutes overlapping the period, its first alert in the period
    (`first`, when the period's first alert fired), its last alert before `until`,
    its revisions before `until` and the newest check of its link."""
    false_alarms, actionable = figures.false_alarms, figures.actionable
    verdicts = false_alarms + actionable
    interval = wilson(false_alarms, verdicts)
    muted = merged_mutes(mutes, period)
    ended_early = []
    for m in mutes:
        if m.end_reason == MuteEndReason.ENDED_BY_PERSON:  # not one the sweep ended as unused
            by = m.ended_by
            ended_early.append({"mute": m.pk, "ended_at": m.ended_at.isoformat(), "expires_at": m.expires_at.isoformat(),
                                "ended_by": by.get_username() if by is not None else None})
    in_period, previous = [], None
    for r in revisions:
        if r.changed_at >= period.since:
            in_period.append({"at": r.changed_at.isoformat(), "action": r.action, "by": r.changed_by.get_username() if r.changed_by else None,
                              "source": r.source, "changed": changed_keys(previous, r.snapshot)})
        previous = r.snapshot
    named = owner_users(rule.owner, members)
    fires = figures.fires

    row = {
        "rule": rule.name, "rule_id": rule.pk, "owner": rule.owner, "kind": rule.kind,
        "permitted_response": rule.permitted_response, "enabled": rule.enabled,
        "fires": fires, "incidents": figures.incidents,
        "runs": figures.runs, "alerts_per_run": _rate(fires, figures.runs),
        "triaged": figures.triaged, "share_triaged": _rate(figures.triaged, fires),
        "verdicts": verdicts, "false_alarms": false_alarms, "actionable": actionable,
        "false_alarm_rate": _rate(false_alarms, verdicts),
        "false_alarm_low": interval[0] if interval else None, "false_alarm_high": interval[1] if interval else None,
        "actionable_rate": _rate(actionable, verdicts),
        "median_ack_seconds": figures.median_ack_seconds,
        "median_resolve_seconds": figures.median_resolve_seconds,
        "mutes": len(mutes), "muted_hours": total_seconds(muted) / 3600,
        "firing_hours": figures.firing_seconds / 3600, "muted_share": _rate(figures.muted_while_firing, figures.firing_seconds),
        "mutes_ended_early": ended_early,
        # Mutes longer than the project allowed, which only a rule admin may set (alerts/triage.py).
        "mutes_over_limit": [{"mute": m.pk, "hours": (m.expires_at - m.created_at).total_seconds() / 3600,
                              "by": m.created_by.get_username() if m.created_by else None} for m in mutes if m.over_limit],
        "last_fired": last.isoformat() if last else None,
        "revisions": in_period,
        "false_pages": false_pages,
        "link": {"url": link.url, "ok": link.ok, "status_code": link.status_code, "error": link.error,
                 "checked_at": link.checked_at.isoformat()} if link else None,
    }
    row["flags"] = flags(row, period, last, named, names_a_person(rule.owner), created=rule.created_at, first=first)
    return row


def merged_mutes(mutes, period: Period) -> list[tuple[datetime, datetime]]:
    return union(clip([(m.created_at, mute_end(m)) for m in mutes], period))


def flags(row: dict, period: Period, last: datetime | None, named, person: bool, created: datetime | None = None,
          first: datetime | None = None) -> list[dict]:
    """Each flag with the figure that raised it.

    owner_gone looks among the project's members only (`named`): whether an address or a name has an account
    elsewhere in the console, and whose, is not for this project's members to learn. An owner text naming a
    person (`person`) who is no member is "not a member of this project", whether or not such an account exists.
    """
    raised = []
    if row["verdicts"] >= FALSE_ALARM_FLAG_MIN_VERDICTS and row["false_alarm_rate"] > FALSE_ALARM_FLAG_RATE:
        raised.append({"flag": Flag.FALSE_ALARMS, "figure": f"{row['false_alarms']} of {row['verdicts']} verdicts false "
                                                            f"({row['false_alarm_rate']:.0%})"})
    if (row["muted_share"] is not None and row["muted_share"] > MUTED_FLAG_SHARE
            and row["firing_hours"] >= MUTED_FLAG_MIN_FIRING_HOURS
            and first is not None and first <= period.until - timedelta(hours=MUTED_FLAG_MIN_HISTORY_HOURS)):
        raised.append({"flag": Flag.MUTED, "figure": f"muted {row['muted_share']:.0%} of its firing time"})
    if row["fires"] and not row["triaged"]:
        raised.append({"flag": Flag.NEVER_TRIAGED, "figure": f"{row['fires']} alert{'' if row['fires'] == 1 else 's'}, none triaged"})
    # Silence means something only of a rule that could have fired through the whole window: one created
    # less than SILENT_DAYS before `until` has not had the time, so its "never" is no finding.
    window_start = days_before(period.until, SILENT_DAYS)
    if (created is None or created <= window_start) and (last is None or last < window_start):
        raised.append({"flag": Flag.SILENT, "figure": f"last fired {last.isoformat() if last else 'never'}"})
    for user in named:
        if not user.is_active:
            raised.append({"flag": Flag.OWNER_GONE, "figure": f"{user.get_username()} is inactive"})
    if person and not named:
        raised.append({"flag": Flag.OWNER_GONE, "figure": "not a member of this project"})
    link = row["link"]
    if link and not link["ok"]:
        raised.append({"flag": Flag.LINK_DOWN, "figure": f"{link['status_code'] or link['error']} at {when_text(link['checked_at'])}"})
    for m in row["mutes_over_limit"]:
        raised.append({"flag": Flag.MUTED_OVER_LIMIT, "figure": f"mute #{m['mute']} for {m['hours']:.0f} h by {m['by'] or '—'}, "
                                                               "over the project's longest mute"})
    if len(row["revisions"]) >= EDITS_FLAG:
        raised.append({"flag": Flag.EDITED_OFTEN, "figure": f"{len(row['revisions'])} revisions in the period"})
    return [{**f, "words": FLAG_WORDS[f["flag"]]} for f in raised]


def report_rows(project, period: Period, owner: str | None = None) -> list[dict]:
    """The report's rows: one per rule of the project (of `owner`, the rule's owner text exactly, when given).

    A fixed number of queries whatever the number of rules and alerts: each input is read for every rule at once."""
    rules = Rule.objects.filter(project=project).order_by("name")
    if owner:
        rules = rules.filter(owner=owner)
    # Each rule's newest alert before `until` and the newest check of the link it has now (a check of a link since
    # replaced says nothing of it): one index look-up each, inside the rules' query.
    rules = list(rules.annotate(
        last_fired=Subquery(Alert.objects.filter(rule=OuterRef("pk"), fired_at__lt=period.until)
                            .order_by("-fired_at").values("fired_at")[:1]),
        first_fired=Subquery(Alert.objects.filter(rule=OuterRef("pk"), fired_at__gte=period.since, fired_at__lt=period.until)
                             .order_by("fired_at").values("fired_at")[:1]),
        link_check=Subquery(LinkCheck.objects.filter(rule=OuterRef("pk"), url=OuterRef("diagnostic_url"))
                            .order_by("-checked_at", "-pk").values("pk")[:1])))
    ids = [r.pk for r in rules]
    members = list(get_user_model().objects.filter(pk__in=Membership.objects.filter(project=project).values("user_id"))
                   .only("pk", "username", "email", "is_active"))
    false_pages = false_pages_by_rule(rules, since=period.since, until=period.until)
    mutes = defaultdict(list)
    if period.since < period.until and ids:
        for m in (Mute.objects.filter(rule_id__in=ids, created_at__lt=period.until)
                  .filter(Q(ended_at__gt=period.since) | Q(ended_at__isnull=True, expires_at__gt=period.since))
                  .select_related("created_by", "ended_by").order_by("created_at", "pk")):
            mutes[m.rule_id].append(m)
    revisions = defaultdict(list)
    for r in (RuleRevision.objects.filter(rule_id__in=ids, changed_at__lt=period.until)
              .select_related("changed_by").order_by("changed_at", "pk")):
        revisions[r.rule_id].append(r)
    links = LinkCheck.objects.in_bulk([r.link_check for r in rules if r.link_check is not None])
    figures = alert_figures(ids, period, {pk: merged_mutes(ms, period) for pk, ms in mutes.items()})
    return [rule_figures(rule, period, members=members, figures=figures[rule.pk], mutes=mutes[rule.pk], last=rule.last_fired,
                         revisions=revisions[rule.pk], link=links.get(rule.link_check), false_pages=false_pages.get(rule.pk, 0),
                         first=rule.first_fired)
            for rule in rules]


def report(project, period: Period, owner: str | None = None) -> dict:
    from notifications.status import failed_notifications

    return {"project": project.slug, "owner": owner, "since": period.since.isoformat(), "until": period.until.isoformat(),
            "rules": report_rows(project, period, owner),
            # The project's channels (whoever owns the rules), each with its incident messages of the period that
            # failed for good: an incident nobody was told of.
            "notification_failures": failed_notifications(project, since=period.since, until=period.until)}


CSV_COLUMNS = [
    "rule", "owner", "kind", "permitted_response", "fires", "incidents", "runs", "alerts_per_run", "triaged",
    "share_triaged", "verdicts", "false_alarms", "actionable", "false_alarm_rate", "false_alarm_low",
    "false_alarm_high", "actionable_rate", "median_ack_seconds", "median_resolve_seconds", "mutes", "muted_hours",
    "firing_hours", "muted_share", "mutes_ended_early", "last_fired", "revisions", "false_pages", "link_ok",
    "link_checked_at", "flags",
]


def csv_row(row: dict) -> list:
    """A report row as CSV cells: numbers as Python writes them (repr, so the page's figures round-trip), lists joined."""
    cells = {**row,
             "mutes_ended_early": len(row["mutes_ended_early"]),
             "revisions": len(row["revisions"]),
             "link_ok": "" if row["link"] is None else row["link"]["ok"],
             "link_checked_at": "" if row["link"] is None else row["link"]["checked_at"],
             "flags": " ".join(f["flag"] for f in row["flags"])}
    return ["" if cells[c] is None else _inert(cells[c]) for c in CSV_COLUMNS]


def _inert(cell):
    """Free text (an owner) that a spreadsheet would run as a formula gets a leading apostrophe."""
    if isinstance(cell, str) and cell[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + cell
    return cell
