"""Acting on alerts: acknowledge, resolve, verdict, mute; mutes on new alerts; mutes that expire.

Every change of an alert is a conditional UPDATE (the state it may change from
is in the WHERE clause), so two people acting at once change it once, and
every change is its own `AlertChange` row: who (`by`), when (`at`) and a
`note`. Rows the console writes itself (a new alert under a mute, a mute that
expired) have no `by`.

States: firing → acknowledged → resolved; firing or acknowledged → muted;
muted → acknowledged (someone takes it on) or, when its mute expires, firing
again. Resolved is final: it cannot be acknowledged or muted (a ValidationError
naming `state`), except that a hard invariant whose condition cleared with
nobody looking may still be acknowledged (alerts/review.py): it stays resolved
and is marked reviewed. Acknowledging, a verdict, and resolving by hand set
`reviewed_at` the first time. Acknowledging an acknowledged alert and resolving a resolved
one change nothing and write no row (the functions return None). A verdict may
be given on any alert, resolved included; a later verdict replaces the alert's
verdict and both rows stay.

Mutes: each records the alerts it muted (MuteHold rows) and ends once, with a
reason: expired (the sweep), ended_by_person (end_mute), unused (the sweep,
after the project's unused_days covering no alert) or replaced (extend_mute,
whose new mute `extends` the old). Its length is bounded by the project's
MuteSettings (7 days unless set): past it only a rule admin, and the mute is
marked `over_limit`.

Bad input is a django ValidationError whose dict names the field (`verdict`,
`note`, `scope`, `reason`, `expires_at`, `duration_minutes`, `text`); the API and the
inbox page show it as it is. Permission is the caller's: every view checks
`opsconsole.permissions.can_triage` first.
"""
from datetime import datetime, timedelta, timezone as dt_timezone

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from alerts.changes import record_change
from alerts.models import (
    MUTE_DURATION_CEILING, Alert, AlertState, ChangeKind, Mute, MuteComment, MuteEndReason, MuteHold, MuteScope,
    MuteSettings, Verdict,
)
from alerts.review import needs_review_q, resolved_no_verdict, run_ids_needing_review

# What the inbox page offers (minutes, label); the API takes any duration up to the project's MuteSettings
# (7 days unless set), and a rule admin up to MUTE_DURATION_CEILING.
MUTE_DURATIONS = [(60, "1 hour"), (240, "4 hours"), (1440, "24 hours"), (10080, "7 days")]
ACKNOWLEDGEABLE = [AlertState.FIRING, AlertState.MUTED]
MUTABLE = [AlertState.FIRING, AlertState.ACKNOWLEDGED]
OPEN = [AlertState.FIRING, AlertState.ACKNOWLEDGED, AlertState.MUTED]


def _actor(user):
    return user if getattr(user, "pk", None) else None


def _record(alert, kind, user, now, note="", **fields):
    """The change's row (and, at commit, its live message): `alert` must already show the new state."""
    return record_change(alert, kind, at=now, by=_actor(user), note=note, **fields)


# A note or a mute's reason: a few paragraphs at most.
MAX_TEXT = 4000
# Row ids are 64-bit: a larger number names no row, and SQLite cannot even compare one.
MAX_ID = 2**63 - 1


def _text(value, field):
    """A free-text field: None is empty, text is stripped, anything else (a number, a list) is refused by name."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValidationError({field: f"{field} must be text"})
    if "\x00" in value:
        raise ValidationError({field: f"{field} must not contain the NUL character"})
    if len(value) > MAX_TEXT:
        raise ValidationError({field: f"{field} is {len(value)} characters long; at most {MAX_TEXT} are allowed"})
    return value.strip()


def _current_state(alert):
    alert.state = Alert.objects.filter(pk=alert.pk).values_list("state", flat=True).get()
    return alert.state


def _duration_words(duration):
    days = duration / timedelta(days=1)
    return f"{days:g} days" if days >= 1 else f"{duration / timedelta(hours=1):g} hours"


def max_duration_words(project_id=None):
    """The project's longest mute in words (the default's when no project is named)."""
    return _duration_words(MuteSettings.of(project_id).max_duration)


def max_duration_words_of(project_ids) -> dict:
    """max_duration_words for several projects in one query: {project_id: words}."""
    return {pk: _duration_words(s.max_duration) for pk, s in MuteSettings.of_projects(set(project_ids)).items()}


def acknowledge(alert, user, now=None):
    """Firing or muted → acknowledged. Returns the new row, or None if it was acknowledged already.

    A hard invariant whose condition cleared with nobody looking (alerts/review.py) stays resolved and is
    marked reviewed: acknowledging it is how it leaves the inbox's default view.
    """
    now = now or timezone.now()
    with transaction.atomic():
        if not Alert.objects.filter(pk=alert.pk, state__in=ACKNOWLEDGEABLE).update(state=AlertState.ACKNOWLEDGED):
            if _current_state(alert) == AlertState.RESOLVED:
                if Alert.objects.filter(needs_review_q(), pk=alert.pk).update(reviewed_at=now):
                    alert.reviewed_at = now
                    return _record(alert, ChangeKind.ACKNOWLEDGED, user, now, note="reviewed after its condition cleared")
                raise ValidationError({"state": f"alert {alert.pk} is resolved: a resolved alert cannot be acknowledged"})
            return None
        alert.state = AlertState.ACKNOWLEDGED
        _reviewed(alert, now)
        return _record(alert, ChangeKind.ACKNOWLEDGED, user, now)


def _reviewed(alert, now):
    """A person has looked at the alert (the first time counts)."""
    if Alert.objects.filter(pk=alert.pk, reviewed_at__isnull=True).update(reviewed_at=now):
        alert.reviewed_at = now


def resolve(alert, user, note="", now=None):
    """Any open state → resolved. Returns the new row, or None if it was resolved already.

    If the rule's condition still holds, the next point that holds it fires a new alert.
    """
    now = now or timezone.now()
    note = _text(note, "note")
    with transaction.atomic():
        if not Alert.objects.filter(pk=alert.pk, state__in=OPEN).update(state=AlertState.RESOLVED, resolved_at=now):
            _current_state(alert)
            return None
        alert.state, alert.resolved_at = AlertState.RESOLVED, now
        if _actor(user) is not None:
            _reviewed(alert, now)  # resolving it by hand is looking at it
        return _record(alert, ChangeKind.RESOLVED, user, now, note=note)


def give_verdict(alert, user, verdict, note="", now=None):
    """Actionable or false alarm (a false alarm needs a note saying why), on an alert in any state."""
    now = now or timezone.now()
    note = _text(note, "note")
    if not isinstance(verdict, str) or verdict not in Verdict.values:
        raise ValidationError({"verdict": f"verdict must be one of {', '.join(Verdict.values)}"})
    if verdict == Verdict.FALSE_ALARM and not note:
        raise ValidationError({"note": "a note is required for a false alarm: say why it was not a real problem"})
    with transaction.atomic():
        # The row lock orders concurrent verdicts: the alert keeps the verdict of its newest row.
        Alert.objects.select_for_update().filter(pk=alert.pk).values_list("pk", flat=True).get()
        Alert.objects.filter(pk=alert.pk).update(verdict=verdict)
        alert.verdict = verdict
        _reviewed(alert, now)
        return _record(alert, ChangeKind.VERDICT, user, now, note=note, verdict=verdict)


def parse_expiry(expires_at=None, duration_minutes=None, now=None):
    """The end of a mute from an ISO 8601 date-time (naive = UTC) or a number of minutes from now; None if neither."""
    now = now or timezone.now()
    given = lambda v: v is not None and v != ""  # noqa: E731
    if given(expires_at) and given(duration_minutes):
        raise ValidationError({"expires_at": "give expires_at or duration_minutes, not both"})
    if given(duration_minutes):
        try:
            minutes = int(str(duration_minutes).strip())
        except ValueError:
            minutes = None
        if isinstance(duration_minutes, bool) or minutes is None or minutes <= 0:
            raise ValidationError({"duration_minutes": "duration_minutes must be a whole number of minutes above 0"})
        if minutes > MUTE_DURATION_CEILING / timedelta(minutes=1):
            raise ValidationError({"duration_minutes": f"a mute lasts at most {_duration_words(MUTE_DURATION_CEILING)}"})
        return now + timedelta(minutes=minutes)
    if not given(expires_at):
        return None
    when = expires_at if isinstance(expires_at, datetime) else None
    if isinstance(expires_at, str):
        try:
            when = parse_datetime(expires_at.strip())
        except ValueError:  # well formed, but no date: February 30th, an offset of 99 hours
            when = None
    if when is None:
        raise ValidationError({"expires_at": "expires_at must be an ISO 8601 date-time, e.g. 2026-12-01T18:00:00Z"})
    if timezone.is_naive(when):
        when = when.replace(tzinfo=dt_timezone.utc)
    try:
        return when.astimezone(dt_timezone.utc)
    except OverflowError:  # 9999-12-31T23:59-23:59 is past the last instant a date can hold
        raise ValidationError({"expires_at": "expires_at is beyond the year 9999"}) from None


def _window(expires_at, duration_minutes, now, project_id, user, errors):
    """The end of a new mute and whether it is over the project's limit; a problem goes into `errors` by field.

    In the future, and at most the project's max duration ahead (MuteSettings, 7 days by default); a rule
    admin may go further (up to MUTE_DURATION_CEILING), and the mute is then marked over_limit.
    """
    from opsconsole.permissions import can_edit_rules

    field = "duration_minutes" if duration_minutes not in (None, "") else "expires_at"
    limit = MuteSettings.of(project_id).max_duration
    try:
        when = parse_expiry(expires_at, duration_minutes, now)
    except ValidationError as exc:
        errors.update(exc.message_dict)
        return None, False
    if when is None:
        errors["expires_at"] = (
            f"expires_at (or duration_minutes) is required: a mute always ends, at most {_duration_words(limit)} ahead"
        )
    elif when <= now:
        errors["expires_at"] = "expires_at must be in the future"
    elif when - now > MUTE_DURATION_CEILING:
        errors[field] = f"{field} is at most {_duration_words(MUTE_DURATION_CEILING)} ahead; no indefinite mute"
    elif when - now > limit:
        from ingest.models import Project

        if can_edit_rules(user, Project.objects.get(pk=project_id)):
            return when, True
        errors[field] = (
            f"{field} is at most {_duration_words(limit)} ahead (this project's limit); a longer mute needs a rule admin"
        )
    return when, False


def _mute_reason(reason, errors, missing) -> str | None:
    """A mute's reason, checked: its problem (not text, too long, blank: `missing`) goes into `errors`."""
    try:
        reason = _text(reason, "reason")
    except ValidationError as exc:
        errors.update(exc.message_dict)
        return None
    if reason == "":
        errors["reason"] = missing
    return reason


def mute(alert, user, scope, reason, expires_at=None, *, duration_minutes=None, now=None):
    """Mute the alert's rule on every run of the project, on its run, or on its component, until expires_at.

    Creates the Mute, and moves every open alert it covers (firing or
    acknowledged) to muted, each with its own "muted" row and MuteHold. New
    alerts it covers are created muted (apply_mutes) until it ends
    (end_expired_mutes, end_unused_mutes, end_mute, extend_mute).
    """
    now = now or timezone.now()
    errors = {}
    reason = _mute_reason(reason, errors, "a reason is required: say why these alerts may stay quiet")
    if _current_state(alert) == AlertState.RESOLVED:
        errors["state"] = f"alert {alert.pk} is resolved: a resolved alert cannot be muted"
    if not isinstance(scope, str) or scope not in MuteScope.values:
        errors["scope"] = f"scope must be one of {', '.join(MuteScope.values)}"
    expires_at, over_limit = _window(expires_at, duration_minutes, now, alert.rule.project_id, user, errors)
    if errors:
        raise ValidationError(errors)
    with transaction.atomic():
        created = Mute.objects.create(
            project_id=alert.rule.project_id, scope=scope, rule_id=alert.rule_id,
            run_id=None if scope == MuteScope.RULE else alert.run_id,
            component=alert.component if scope == MuteScope.COMPONENT else "",
            reason=reason, expires_at=expires_at, created_by=_actor(user), created_at=now, over_limit=over_limit,
        )
        created.muted = _mute_covered(created, MUTABLE, user, now)
    if alert.pk in created.muted:
        alert.state = AlertState.MUTED
    return created


def _mute_note(mute):
    return f"mute #{mute.pk} ({mute.scope}) until {mute.expires_at.isoformat()}: {mute.reason}"


def _mute_covered(mute, states, user, now):
    """Move the alerts the mute covers from `states` to muted, one row each; returns their ids."""
    muted = []
    for alert in Alert.objects.filter(mute.alerts_q(), state__in=states).select_related("rule", "run"):
        if Alert.objects.filter(pk=alert.pk, state__in=states).update(state=AlertState.MUTED):
            alert.state = AlertState.MUTED
            _record(alert, ChangeKind.MUTED, user, now, note=_mute_note(mute))
            MuteHold.objects.create(mute=mute, alert=alert, at=now)
            muted.append(alert.pk)
    return muted


def apply_mutes(alert, now=None):
    """A newly created alert that an active mute covers becomes muted, with its own row; returns that mute or None."""
    now = now or timezone.now()
    covering = Mute.objects.active(now).covering(alert).order_by("-expires_at", "-id").first()
    if covering is None:
        return None
    if Alert.objects.filter(pk=alert.pk, state=AlertState.FIRING).update(state=AlertState.MUTED):
        alert.state = AlertState.MUTED
        record_change(alert, ChangeKind.MUTED, step=alert.fired_step, at=now, note=_mute_note(covering))
        MuteHold.objects.create(mute=covering, alert=alert, at=now)
    return covering


def _end(mute, now, end_reason, by=None, note="") -> bool:
    """End the mute once (a conditional update), and fire again the muted alerts it covered that no other active
    mute covers, each with its own "unmuted" row. False when it had ended already (another sweep, a person)."""
    with transaction.atomic():
        claimed = Mute.objects.filter(pk=mute.pk, ended_at__isnull=True).update(
            ended_at=now, end_reason=end_reason, ended_by=_actor(by))
        if not claimed:
            return False
        mute.ended_at, mute.end_reason, mute.ended_by = now, end_reason, _actor(by)
        if note:
            MuteComment.objects.create(mute=mute, by=None, at=now, text=note)
        if end_reason == MuteEndReason.REPLACED:
            return True  # its extension covers the same alerts from now on: they stay muted
        still_active = Mute.objects.active(now)
        said = {
            MuteEndReason.EXPIRED: f"expired at {mute.expires_at.isoformat()}",
            MuteEndReason.ENDED_BY_PERSON: "ended by hand",
            MuteEndReason.UNUSED: "ended: it covered no alert",
        }[end_reason]
        for alert in Alert.objects.filter(mute.alerts_q(), state=AlertState.MUTED).select_related("rule", "run"):
            if still_active.covering(alert).exists():
                continue
            if Alert.objects.filter(pk=alert.pk, state=AlertState.MUTED).update(state=AlertState.FIRING):
                alert.state = AlertState.FIRING
                _record(alert, ChangeKind.UNMUTED, by, now, note=f"mute #{mute.pk} ({mute.scope}) {said}")
    return True


def end_expired_mutes(now=None) -> int:
    """End every expired mute once (end_reason expired); its muted alerts no other active mute covers fire again.

    Each mute is claimed by a conditional update of its ended_at, so two
    sweeps at once end it, and un-mute its alerts, exactly once.
    """
    now = now or timezone.now()
    return sum(_end(m, now, MuteEndReason.EXPIRED) for m in Mute.objects.filter(ended_at__isnull=True, expires_at__lte=now))


def end_unused_mutes(now=None) -> int:
    """End, once, every active mute that has covered no alert for its project's unused_days (end_reason unused).

    Covering no alert: it holds no muted alert now, and has muted none (no MuteHold) in those days, nor was
    it made in them. The comment log says why it ended.
    """
    now = now or timezone.now()
    ended = 0
    days_of = {}
    for candidate in Mute.objects.active(now).order_by("id"):
        if candidate.project_id not in days_of:
            days_of[candidate.project_id] = MuteSettings.of(candidate.project_id).unused_days
        days = days_of[candidate.project_id]
        since = now - timedelta(days=days)
        if candidate.created_at > since or candidate.holds.filter(at__gt=since).exists():
            continue
        if Alert.objects.filter(candidate.alerts_q(), state=AlertState.MUTED).exists():
            continue
        ended += _end(candidate, now, MuteEndReason.UNUSED,
                      note=f"ended: covered no alert for {days} day{'s' if days != 1 else ''}")
    return ended


def _active_mute(mute, now, errors):
    mute.refresh_from_db(fields=["ended_at", "expires_at"])
    if mute.ended_at is not None or mute.expires_at <= now:
        errors["state"] = f"mute #{mute.pk} has ended: only an active mute can be ended or extended"


def end_mute(mute, user, now=None) -> Mute:
    """End an active mute by hand (ended_by, end_reason ended_by_person); its alerts fire again as at expiry."""
    now = now or timezone.now()
    errors = {}
    _active_mute(mute, now, errors)
    if errors or not _end(mute, now, MuteEndReason.ENDED_BY_PERSON, by=user):
        raise ValidationError(errors or {"state": f"mute #{mute.pk} has ended: only an active mute can be ended"})
    return mute


def extend_mute(mute, user, reason, expires_at=None, *, duration_minutes=None, now=None) -> Mute:
    """Replace an active mute with a new one of the same scope that `extends` it, until a later expiry.

    The old one ends (end_reason replaced, ended_by); the new one starts now and holds the muted alerts the
    old one covered (a MuteHold each). Its expiry obeys the same window as a new mute's.
    """
    now = now or timezone.now()
    errors = {}
    reason = _mute_reason(reason, errors, "a reason is required: say why these alerts may stay quiet longer")
    _active_mute(mute, now, errors)
    expires_at, over_limit = _window(expires_at, duration_minutes, now, mute.project_id, user, errors)
    if errors:
        raise ValidationError(errors)
    with transaction.atomic():
        if not _end(mute, now, MuteEndReason.REPLACED, by=user):
            raise ValidationError({"state": f"mute #{mute.pk} has ended: only an active mute can be extended"})
        created = Mute.objects.create(
            project_id=mute.project_id, scope=mute.scope, rule_id=mute.rule_id, run_id=mute.run_id,
            component=mute.component, reason=reason, expires_at=expires_at, created_by=_actor(user),
            created_at=now, over_limit=over_limit, extends=mute,
        )
        held = list(Alert.objects.filter(created.alerts_q(), state=AlertState.MUTED))
        MuteHold.objects.bulk_create(MuteHold(mute=created, alert=a, at=now) for a in held)
        created.muted = _mute_covered(created, [AlertState.FIRING], user, now)
    return created


def comment_on_mute(mute, user, text, now=None) -> MuteComment:
    """A person's note in the mute's comment log (any time, ended or not)."""
    now = now or timezone.now()
    text = _text(text, "text")
    if not text:
        raise ValidationError({"text": "text is required: say what you want noted"})
    return MuteComment.objects.create(mute=mute, by=_actor(user), at=now, text=text)


def catch_up_mutes(now=None) -> int:
    """Mute firing alerts that an active mute covers (an alert created while its mute was being committed)."""
    now = now or timezone.now()
    return sum(len(_mute_covered(m, [AlertState.FIRING], None, now)) for m in Mute.objects.active(now))


def sweep_mutes(now=None) -> int:
    """The periodic sweep's part: expire mutes, end unused ones, then make sure active ones cover what they should."""
    now = now or timezone.now()
    ended = end_expired_mutes(now)
    ended += end_unused_mutes(now)
    catch_up_mutes(now)
    return ended


# The inbox's state filter: "open" (the default: firing, acknowledged or muted, and hard invariants that
# cleared with nobody looking), "all", one state, or the two lists of alerts waiting for a person's word
# (alerts/review.py): "needs_review", "resolved_no_verdict".
NEEDS_REVIEW, RESOLVED_NO_VERDICT = "needs_review", "resolved_no_verdict"
INBOX_STATES = ["open", "all", *AlertState.values, NEEDS_REVIEW, RESOLVED_NO_VERDICT]


def visible_alert(user, pk) -> Alert:
    """The alert if the caller may see its run's project; 404 otherwise (its existence is not revealed)."""
    from django.shortcuts import get_object_or_404

    from opsconsole.permissions import visible_projects

    alerts = Alert.objects.filter(run__project__in=visible_projects(user)).select_related("rule", "run__project")
    return get_object_or_404(alerts, pk=pk)


def inbox_runs_needing_review(user, project=None, rule=None, run=None) -> list[str]:
    """The run ids the inbox marks "needs review" under these filters (page, API and live frames alike)."""
    return run_ids_needing_review(inbox_alerts(user, state="all", project=project, rule=rule, run=run))


def inbox_alerts(user, state="open", project=None, rule=None, run=None):
    """Alerts of the runs the user may see, newest first; the one query behind the inbox page and API.

    `project` is a slug and `run` a run id (an unknown or invisible one gives
    no alerts, so nothing is revealed); `rule` is a rule id.
    """
    from opsconsole.permissions import visible_projects

    errors = {}
    state = state or "open"
    if state not in INBOX_STATES:
        errors["state"] = f"state must be one of {', '.join(INBOX_STATES)}"
    rule_id = None
    if rule not in (None, ""):
        try:
            rule_id = int(str(rule).strip())
        except ValueError:
            rule_id = 0
        if not 1 <= rule_id <= MAX_ID:
            errors["rule"] = f"rule must be a rule id (a whole number from 1 to {MAX_ID})"
    if errors:
        raise ValidationError(errors)
    alerts = Alert.objects.filter(run__project__in=visible_projects(user)).select_related("rule", "run__project")
    if state == "open":
        alerts = alerts.filter(Q(state__in=OPEN) | needs_review_q())
    elif state == NEEDS_REVIEW:
        alerts = alerts.filter(needs_review_q())
    elif state == RESOLVED_NO_VERDICT:
        alerts = resolved_no_verdict(alerts)
    elif state != "all":
        alerts = alerts.filter(state=state)
    if project:
        alerts = alerts.filter(run__project__slug=project)
    if rule_id is not None:
        alerts = alerts.filter(rule_id=rule_id)
    if run:
        alerts = alerts.filter(run__run_id=run)
    return alerts.order_by("-fired_at", "-id")
