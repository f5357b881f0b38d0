"""The inbox page: alerts across the user's runs, and plain-form actions on them (no JavaScript needed).

Each action is a POST to /inbox/alerts/<id>/<action>/ carrying the inbox's
filters in its query string: on success a message and a redirect back to the
inbox as it was filtered; on a bad field (a false alarm without a note, a mute
without a reason) the inbox again, status 400, with the error beside that
row's field. Members see the inbox; only `can_triage` users get the buttons,
and the action views check it again (403), and an alert outside the user's
projects is a 404.
"""
import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from alerts import triage
from alerts.models import AlertState, Mute, MuteScope, Rule, Verdict
from alerts.triage_views import visible_alert
from opsconsole.permissions import can_triage, visible_projects

PAGE_SIZE = 100
STATE_LABELS = {"open": "Open", "all": "All", **{s.value: s.label for s in AlertState},
                "needs_review": "Needs review", "resolved_no_verdict": "Resolved, no verdict"}


def _inbox_url(request):
    query = request.GET.urlencode()
    return reverse("console:inbox") + (f"?{query}" if query else "")


def _magnitude(alert):
    if alert.magnitude is None:
        return "—"
    return f"{alert.magnitude:.4g} {alert.magnitude_unit}".strip()


def _render_inbox(request, failed=None, status=200):
    """The page; `failed` is (alert id, action, errors by field, values posted, other errors) after a refused action."""
    params = request.GET
    filters = {key: params.get(key, "") for key in ("state", "project", "rule")}
    filters["state"] = filters["state"] or "open"
    filter_errors = {}
    try:
        alerts = triage.inbox_alerts(request.user, **filters)
    except ValidationError as exc:
        filter_errors = {field: " ".join(msgs) for field, msgs in exc.message_dict.items()}
        alerts = triage.inbox_alerts(request.user)
    page = Paginator(alerts, PAGE_SIZE).get_page(params.get("page"))
    muted = [a for a in page.object_list if a.state == AlertState.MUTED]
    mutes = list(
        Mute.objects.active(timezone.now()).filter(rule_id__in={a.rule_id for a in muted}).order_by("-expires_at")
    ) if muted else []
    triagers = {}
    for alert in page.object_list:
        project = alert.run.project
        if project.pk not in triagers:
            triagers[project.pk] = can_triage(request.user, project)
        alert.can_act = triagers[project.pk]
        alert.magnitude_text = _magnitude(alert)
        alert.mute = next((m for m in mutes if m.covers(alert)), None) if alert.state == AlertState.MUTED else None
        alert.failed = None
        if failed and failed[0] == alert.pk:
            alert.failed = {"action": failed[1], "errors": failed[2], "values": failed[3], "other": failed[4]}
    projects = visible_projects(request.user).order_by("slug")
    rules = Rule.objects.filter(project__in=projects).select_related("project").order_by("project__slug", "name")
    if filters["project"]:
        rules = rules.filter(project__slug=filters["project"])
    paging = params.copy()
    paging.pop("page", None)
    return render(request, "console/inbox.html", {
        "page": page,
        "filters": filters,
        "filter_errors": filter_errors,
        "states": [(value, STATE_LABELS[value]) for value in triage.INBOX_STATES],
        "projects": projects,
        "rules": rules,
        "query": params.urlencode(),
        "paging_query": paging.urlencode(),
        "durations": triage.MUTE_DURATIONS,
        "verdicts": Verdict.choices,
        "scopes": MuteScope.choices,
        "live_projects": json.dumps([p.slug for p in projects]),
    }, status=status)


@login_required
def inbox(request):
    return _render_inbox(request)


def _action(name, fields, act, done):
    """A POST-only view: visible alert (404), can_triage (403), act, then a message and back to the inbox."""

    @login_required
    @require_POST
    def view(request, pk):
        alert = visible_alert(request.user, pk)
        if not can_triage(request.user, alert.run.project):
            raise PermissionDenied("acting on alerts needs the on-call or rule admin role in this project")
        try:
            result = act(alert, request.user, request.POST)
        except ValidationError as exc:
            errors = {field: " ".join(msgs) for field, msgs in exc.message_dict.items()}
            inline = {field: msg for field, msg in errors.items() if field in fields}
            if not inline:  # a state the alert is in (e.g. resolved meanwhile): say so at the top
                for msg in errors.values():
                    messages.error(request, f"Alert {alert.pk}: {msg}")
                return redirect(_inbox_url(request))
            values = {field: request.POST.get(field, "") for field in fields}
            other = [msg for field, msg in errors.items() if field not in fields]
            return _render_inbox(request, failed=(alert.pk, name, inline, values, other), status=400)
        level, text = done(alert, result)
        messages.add_message(request, level, text)
        return redirect(_inbox_url(request))

    view.__name__ = f"inbox_{name}"
    return view


def _label(alert):
    return f"{alert.rule.name} on {alert.run.run_id}" + (f" ({alert.component})" if alert.component else "")


acknowledge = _action(
    "acknowledge", [],
    lambda alert, user, post: triage.acknowledge(alert, user),
    lambda alert, change: (messages.SUCCESS, f"Acknowledged {_label(alert)}.") if change
    else (messages.INFO, f"{_label(alert)} was acknowledged already."),
)
resolve = _action(
    "resolve", ["note"],
    lambda alert, user, post: triage.resolve(alert, user, note=post.get("note", "")),
    lambda alert, change: (messages.SUCCESS, f"Resolved {_label(alert)}.") if change
    else (messages.INFO, f"{_label(alert)} was resolved already."),
)
verdict = _action(
    "verdict", ["verdict", "note"],
    lambda alert, user, post: triage.give_verdict(alert, user, post.get("verdict"), post.get("note", "")),
    lambda alert, change: (messages.SUCCESS, f"Verdict on {_label(alert)}: {Verdict(change.verdict).label.lower()}."),
)


def _mute(alert, user, post):
    try:
        return triage.mute(alert, user, post.get("scope"), post.get("reason", ""), duration_minutes=post.get("duration_minutes"))
    except ValidationError as exc:
        errors = exc.message_dict
        if "expires_at" in errors:  # the page asks for a duration: say it in its words, on its field
            del errors["expires_at"]
            errors["duration_minutes"] = [
                f"choose when the mute ends (at most {triage.max_duration_words()} ahead); there is no indefinite mute"
            ]
        raise ValidationError(errors) from None


mute = _action(
    "mute", ["scope", "reason", "duration_minutes"],
    _mute,
    lambda alert, created: (
        messages.SUCCESS,
        f"Muted {alert.rule.name} ({MuteScope(created.scope).label.lower()} scope) until "
        f"{created.expires_at:%Y-%m-%d %H:%M} UTC; {len(created.muted)} open alert(s) muted.",
    ),
)
