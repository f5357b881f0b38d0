"""One way to record an alert's change: the AlertChange row, and the live `alert` message after commit.

Every site that changes an alert (evaluation, the wall-clock sweep, triage)
calls `record_change` after updating the alert, so the history row and what
the console's websockets hear cannot drift apart.
"""
from django.utils import timezone

from alerts import incidents
from alerts.health import publish_review_mark
from alerts.models import AlertChange, ChangeKind
from alerts.wire import alert_as_dict
from opsconsole.live import publish


# What may put a run on the "needs review" list or take it off (an alert ends, or a person looks at it).
MAY_CHANGE_REVIEW = (ChangeKind.RESOLVED, ChangeKind.ACKNOWLEDGED, ChangeKind.VERDICT, ChangeKind.NEW_NORMAL)


def record_change(alert, kind, *, step=None, at=None, by=None, receipt=None, note="", **fields) -> AlertChange:
    """Create the change row; the run's and project's live groups hear of it once the transaction commits.

    The message carries `alert` as its in-memory fields stand when the
    transaction commits, so update the instance along with the row; `rule` and
    `run` should be loaded (select_related) to spare a query each.
    Other AlertChange fields (e.g. `verdict`) go in `fields`; the message carries them too.
    """
    change = AlertChange.objects.create(
        alert=alert, kind=kind, step=step, at=at or timezone.now(), by=by, receipt=receipt, note=note, **fields
    )
    _announce(change, fields)
    return change


def record_changes(changes):
    """Unsaved AlertChange rows (their `alert` loaded, no extra fields) written in one INSERT, each then
    announced as record_change announces one."""
    AlertChange.objects.bulk_create(changes)
    for change in changes:
        _announce(change, {})


def _announce(change, fields):
    alert, by = change.alert, change.by
    publish(alert.run, "alert", lambda: {
        "change": str(change.kind),
        "step": change.step,
        "at": change.at,
        "by": by.get_username() if by is not None else None,
        "note": change.note,
        **fields,
        "alert": alert_as_dict(alert),  # at commit: as this transaction left it
    })
    if change.kind in MAY_CHANGE_REVIEW:  # after the alert's frame: its run's mark and the inbox's list, as they now stand
        publish_review_mark(alert.run)
    # Its incident's state follows a person's or a sweep's change (evaluation's: once per batch, alerts/incidents.py).
    incidents.alert_changed(alert, change.kind, receipt=change.receipt, by=by, now=change.at)
