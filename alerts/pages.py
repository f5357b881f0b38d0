"""The alerts app's HTML pages: the rules pages, the inbox with its plain-form actions, and the starter rules' runbooks.

Rules: members of a project read its rules; its rule admins create, edit and
delete them (others get 403, non-members 404). Every save goes through
`save_rule` (source "console"), so governance is checked as on every other path
and each change is a RuleRevision.

Inbox: alerts across the user's runs. Each action is a POST to
/inbox/alerts/<id>/<action>/ carrying the inbox's filters in its query string:
on success a message and a redirect back to the inbox as it was filtered; on a
bad field (a false alarm without a note, a mute without a reason) the inbox
again, status 400, with the error beside that row's field. Members see the
inbox; only `can_triage` users get the buttons, the action views check it
again (403), and an alert outside the user's projects is a 404.
"""
import json
from collections import defaultdict
from types import SimpleNamespace

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.db.models import Count, ProtectedError
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from alerts import backtest, backtest_jobs, describe, faults, incident_actions, incidents, rebaseline, review, tasks, triage
from alerts.fatigue import rules_to_fix_first
from alerts.incident_page import incident_page
from alerts.forms import RuleForm
from alerts.models import Alert, AlertState, Incident, Mute, MuteEndReason, MuteScope, Rule, RuleRevision, Verdict
from alerts.rules import delete_rule, EDIT_DENIED, save_rule
from alerts.starter import RUNBOOKS
from opsconsole.next_page import back_to
from opsconsole.permissions import can_edit_rules, can_triage, rule_admin_projects, triage_project_ids, visible_projects
from opsconsole.templatetags.times import when_text


RECENT_ALERTS = 20


def _visible_rule(request, pk, rules=None):
    rules = Rule.objects.all() if rules is None else rules
    return get_object_or_404(rules.filter(project__in=visible_projects(request.user)).select_related("project"), pk=pk)


def _editable_rule(request, pk):
    rule = _visible_rule(request, pk)  # 404 for non-members
    if not can_edit_rules(request.user, rule.project):
        raise PermissionDenied(EDIT_DENIED)
    return rule


def _with_stats(rules):
    return faults.with_health(describe.with_stats(rules))


def _add_stats(rules):
    mutes = describe.mute_counts([rule.pk for rule in rules])
    for rule in rules:
        rule.false_alarm_rate = describe.false_alarm_rate(rule.false_alarm_count, rule.verdict_count)
        rule.mute_count = mutes.get(rule.pk, 0)
        rule.health = faults.health(rule)


@login_required
def rule_list(request):
    projects = list(visible_projects(request.user).order_by("slug"))
    rules = _with_stats(Rule.objects.filter(project__in=projects).select_related("project"))
    selected = request.GET.get("project") or ""
    if selected:
        rules = rules.filter(project__slug=selected)
    rules = list(rules.order_by("project__slug", "name"))
    _add_stats(rules)
    return render(request, "alerts/rules.html", {
        "rules": rules,
        "fix_first": rules_to_fix_first(rules),
        "projects": projects,
        "selected": selected,
        "can_create": rule_admin_projects(request.user).exists(),
    })


@login_required
def rule_detail(request, pk):
    rule = _visible_rule(request, pk, _with_stats(Rule.objects.all()))
    _add_stats([rule])
    alerts = list(rule.alerts.select_related("run").order_by("-fired_at", "-id")[:RECENT_ALERTS])
    for alert in alerts:
        alert.run_url = reverse("console:run", args=[alert.run.run_id])
    revisions = RuleRevision.objects.filter(rule=rule).select_related("changed_by").order_by("id")
    last_alert = alerts[0] if alerts else None
    return render(request, "alerts/rule_detail.html", {
        "rule": rule,
        "can_edit": can_edit_rules(request.user, rule.project),
        "scope_rows": describe.scope_rows(rule.scope, rule.kind),
        "targets": (rule.scope or {}).get("metrics") or (rule.scope or {}).get("conditions") or [],
        "persistence_words": describe.persistence_words(rule.persistence),
        "kind_words": describe.kind_words(rule.kind, rule.params),
        "response_words": describe.RESPONSE_WORDS.get(rule.permitted_response, ""),
        "param_words": describe.param_words(rule.kind, rule.params),
        "alerts": alerts,
        "last_alert": last_alert,
        "history": describe.revision_history(revisions),
        "health": rule.health,
        "faults": faults.recent(rule),
    })


def _save_form(request, form, rule):
    """Validate, save through save_rule (source "console"); True when saved."""
    if not form.is_valid():
        return False
    try:
        save_rule(form.apply(rule), user=request.user, source="console")
    except ValidationError as exc:  # full_clean's backstop: same governance, plus model constraints
        form.add_model_errors(exc)
        return False
    return True


@login_required
def rule_create(request):
    projects = rule_admin_projects(request.user).order_by("slug")
    if not projects.exists():
        raise PermissionDenied(EDIT_DENIED)
    initial = {}
    wanted = request.GET.get("project")
    if wanted and projects.filter(slug=wanted).exists():
        initial["project"] = projects.get(slug=wanted)
    form = RuleForm(request.POST if request.method == "POST" else None, projects=projects, initial=initial)
    if request.method == "POST":
        rule = Rule()
        if _save_form(request, form, rule):
            messages.success(request, f"Rule {rule.name} created.")
            return redirect("console:rule", pk=rule.pk)
    return render(request, "alerts/rule_form.html", {"form": form, "rule": None})


@login_required
def rule_edit(request, pk):
    rule = _editable_rule(request, pk)
    projects = rule_admin_projects(request.user).order_by("slug")
    form = RuleForm(request.POST if request.method == "POST" else None, projects=projects, instance=rule)
    if request.method == "POST":
        if _save_form(request, form, rule):
            messages.success(request, f"Rule {rule.name} saved.")
            return redirect("console:rule", pk=rule.pk)
        rule.refresh_from_db()  # the page header shows the rule as stored, not the refused edit
    return render(request, "alerts/rule_form.html", {"form": form, "rule": rule})


@login_required
@require_POST
def rule_backtest(request):
    """The rule form's Backtest button: starts a backtest of the form's rule over stored runs, shown under the form.

    The form page is for rule admins, and so is starting a backtest; editing a rule backtests the form's values,
    and compares them with the stored rule replayed over the same runs. The job runs as a task: its result is under the form when it is done before the page is
    drawn (the embedded console runs it there and then), else static/js/backtest.js polls its page until it is.
    """
    projects = rule_admin_projects(request.user).order_by("slug")
    if not projects.exists():
        raise PermissionDenied(EDIT_DENIED)
    editing = _editable_rule(request, int(request.POST["editing"])) if request.POST.get("editing", "").isdigit() and len(request.POST["editing"]) < 19 else None
    form = RuleForm(request.POST, projects=projects, instance=editing)
    run_ids = request.POST.get("backtest_runs", "").replace(",", " ").split()
    job = selection_error = None
    status = 200
    if form.is_valid():
        rule = form.apply(Rule())
        try:
            rule.full_clean(validate_unique=False, validate_constraints=False)
            runs = backtest.chosen_runs(rule.project, run_ids=run_ids)
            job = tasks.start_backtest(request.user, rule, runs, {"runs": run_ids} if run_ids else {}, compared_with=editing)
        except ValidationError as exc:
            form.add_model_errors(exc)
        except backtest.BadSelection as exc:
            selection_error = str(exc)
        except backtest_jobs.TooManyBacktests as exc:
            selection_error, status = str(exc), 429
    return render(request, "alerts/rule_form.html", {
        "form": form, "rule": editing, "job": job, "backtest_runs": " ".join(run_ids),
        "backtest_error": selection_error, "backtesting": True,
    }, status=status)


@login_required
def backtest_page(request, pk):
    """One backtest, for the project's members: its state, and its result when done (what the rule form polls)."""
    job = backtest_jobs.visible(request.user, pk)
    if job is None:
        raise Http404("no such backtest")
    return render(request, "alerts/backtest.html", {"job": job})


@login_required
def rule_delete(request, pk):
    rule = _editable_rule(request, pk)
    alert_count = rule.alerts.count()
    if request.method == "POST" and not alert_count:
        try:
            delete_rule(rule, user=request.user, source="console")
        except ProtectedError:  # an alert arrived since the count
            alert_count = rule.alerts.count()
        else:
            messages.success(request, f"Rule {rule.name} deleted.")
            return redirect(f"{reverse('console:rules')}?project={rule.project.slug}")
    status = 409 if request.method == "POST" else 200  # refused: the rule's alerts keep it
    return render(request, "alerts/rule_delete.html", {"rule": rule, "alert_count": alert_count}, status=status)


PAGE_SIZE = 50  # alerts a page: each row carries its action forms, so the page weighs this many rows
STATE_LABELS = {"open": "Open", "all": "All", **{s.value: s.label for s in AlertState},
                "needs_review": "Needs review", "resolved_no_verdict": "Resolved, no verdict"}


def _inbox_url(request):
    query = request.GET.urlencode()
    return reverse("console:inbox") + (f"?{query}" if query else "")


def _url_for_each(name, suffix=""):
    """pk -> reverse(name, args=[pk]) + suffix, reversed once: the inbox's 100 rows need ~400 of them, at ~0.1 ms each."""
    marker = "2147483647"  # any pk the route takes; replaced by each row's
    head, tail = reverse(name, args=[int(marker)]).rsplit(marker, 1)
    return lambda pk: f"{head}{pk}{tail}{suffix}"


def _add_urls(alerts, incidents, suffix):
    """Each row's `urls`: its actions' (carrying the inbox's filters, `suffix`) and an incident's page."""
    for targets, routes in ((alerts, {name: _url_for_each(f"console:inbox_{name}", suffix)
                                      for name in ("acknowledge", "resolve", "verdict", "new_normal", "mute")}),
                            (incidents, {**{name: _url_for_each(f"console:inbox_incident_{name}", suffix)
                                            for name in ("acknowledge", "verdict", "mute")},
                                         "page": _url_for_each("console:incident")})):
        for target in targets:
            target.urls = {name: url(target.pk) for name, url in routes.items()}


def _magnitude(alert):
    if alert.magnitude is None:
        return "—"
    return f"{alert.magnitude:.4g} {alert.magnitude_unit}".strip()


def _render_inbox(request, failed=None, status=200):
    """The page; `failed` is ((kind, id), action, errors by field, values posted, other errors) after a refused
    action on an alert or an incident (kind "alert" or "incident")."""
    params = request.GET
    filters = {key: params.get(key, "") for key in ("state", "project", "rule")}
    filters["state"] = filters["state"] or "open"
    filter_errors = {}
    try:
        alerts = triage.inbox_alerts(request.user, **filters)
    except ValidationError as exc:
        filter_errors = {field: " ".join(msgs) for field, msgs in exc.message_dict.items()}
        filters = {"state": "open", "project": "", "rule": ""}
        alerts = triage.inbox_alerts(request.user)
    page = Paginator(alerts, PAGE_SIZE).get_page(params.get("page"))
    muted = [a for a in page.object_list if a.state == AlertState.MUTED]
    mutes = list(
        Mute.objects.active(timezone.now()).filter(rule_id__in={a.rule_id for a in muted}).order_by("-expires_at")
    ) if muted else []
    # Who may act, and how long a mute may last, for every project on the page at once (not a query per project).
    page_projects = {a.run.project_id for a in page.object_list}
    triagers = triage_project_ids(request.user, page_projects)
    longest = triage.max_duration_words_of(page_projects) if page_projects else {}

    def may_act(project):
        return project.pk in triagers

    def failed_on(kind, pk):
        if failed and failed[0] == (kind, pk):
            return {"action": failed[1], "errors": failed[2], "values": failed[3], "other": failed[4]}
        return None

    for alert in page.object_list:
        alert.can_act = may_act(alert.run.project)
        alert.magnitude_text = _magnitude(alert)
        alert.mute = next((m for m in mutes if m.covers(alert)), None) if alert.state == AlertState.MUTED else None
        alert.needs_review = review.needs_review(alert)
        alert.failed = failed_on("alert", alert.pk)
        # What the row's {% if %}s compare: a plain attribute (a lookup through None costs the template an exception).
        alert.failed_action = alert.failed["action"] if alert.failed else ""
    entries = _by_incident(page.object_list, may_act, failed_on)
    # The forms static/js/inbox-panels.js copies into rows: only for someone who may act on one of them.
    any_can_act = any(a.can_act for a in page.object_list) or any(
        e["incident"].can_act for e in entries if e.get("incident") is not None)
    page_incidents = [e["incident"] for e in entries if e.get("incident") is not None]
    _add_urls(page.object_list, page_incidents, f"?{params.urlencode()}" if params else "")
    for target in [*page.object_list, *page_incidents]:
        # The mute form says how far ahead a chosen end may lie in this project (MuteSettings).
        target.max_mute = longest[target.run.project_id]
    quiet = quiet_count = None
    quiet_more = False
    unreviewed_runs, unreviewed_count = [], 0
    if filters["state"] == "open":
        # Runs with an alert nobody acted on: the default view never reads as all clear while one exists.
        # The runs triage.inbox_runs_needing_review lists (the API, live frames), counted in the database and named up to UNREVIEWED_NAMED: the line costs the same for 10 runs or 3,000.
        unreviewed = (triage.inbox_alerts(request.user, state="all", project=filters["project"], rule=filters["rule"])
                      .filter(review.needs_review_q() | review.unreviewed_q()).order_by("run__run_id").values_list("run__run_id", flat=True).distinct())
        unreviewed_count = unreviewed.count()
        unreviewed_runs = list(unreviewed[:UNREVIEWED_NAMED]) if unreviewed_count else []
        # Alerts that ended by themselves with nobody's verdict: counted, so false-alarm rates can be.
        unjudged = triage.inbox_alerts(request.user, state=triage.RESOLVED_NO_VERDICT, project=filters["project"],
                                       rule=filters["rule"])
        # Counted up to QUIET_COUNTED: past that the page says "more than", and the count costs the same at 48,000.
        quiet_count = unjudged[:QUIET_COUNTED + 1].count()
        quiet_more = quiet_count > QUIET_COUNTED
        quiet_count = min(quiet_count, QUIET_COUNTED)
        quiet = list(unjudged[:QUIET_SHOWN])
        for alert in quiet:
            alert.magnitude_text = _magnitude(alert)
    projects = visible_projects(request.user).order_by("slug")
    rules = Rule.objects.filter(project__in=projects).select_related("project").order_by("project__slug", "name")
    if filters["project"]:
        rules = rules.filter(project__slug=filters["project"])
    paging = params.copy()
    paging.pop("page", None)
    return render(request, "alerts/inbox.html", {
        "page": page,
        "entries": entries,
        "quiet": quiet,
        "quiet_count": quiet_count,
        "quiet_more": quiet_more,
        "unreviewed_runs": unreviewed_runs,
        "unreviewed_count": unreviewed_count,
        "filters": filters,
        "filter_errors": filter_errors,
        "states": [(value, STATE_LABELS[value]) for value in triage.INBOX_STATES],
        "projects": projects,
        "rules": rules,
        "any_can_act": any_can_act,
        "review_start_url": reverse("console:review-start"),
        "paging_query": paging.urlencode(),
        "durations": triage.MUTE_DURATIONS,
        "verdicts": Verdict.choices,
        "scopes": MuteScope.choices,
        "live_projects": json.dumps([p.slug for p in projects]),
    }, status=status)


# How many of the alerts that resolved by themselves without a verdict the open inbox lists (all: the filter).
QUIET_SHOWN = 20
# How many of them the open inbox counts; past this it says "more than 1,000" (the filter's pager counts them all).
QUIET_COUNTED = 1000
# How many of the runs with an alert nobody looked at the open inbox names (all of them are counted).
UNREVIEWED_NAMED = 10


class _Member:
    """An incident's alert as blast_radius reads it (incidents.origin_key: its rule's kind and name, metric, step...)."""

    __slots__ = ("pk", "metric", "component", "magnitude", "first_step", "rule")

    def __init__(self, pk, metric, component, magnitude, first_step, rule):
        self.pk, self.metric, self.component, self.magnitude, self.first_step, self.rule = (
            pk, metric, component, magnitude, first_step, rule)


def _by_incident(alerts, may_act, failed_on):
    """The page's rows: one per incident (at its newest alert's place, with the alerts of it on this page),
    and alerts in no incident on their own. Each entry is {"incident", "alerts"} or {"alert"}."""
    ids = {a.incident_id for a in alerts if a.incident_id is not None}
    found = {
        i.pk: i for i in Incident.objects.filter(pk__in=ids).select_related("run__project", "origin__rule")
        .prefetch_related("reviews")  # reviews that opened on it (reviews app)
    }
    entries, placed = [], {}
    for alert in alerts:
        incident = found.get(alert.incident_id)
        if incident is None:
            entries.append({"alert": alert})
            continue
        if incident.pk not in placed:
            placed[incident.pk] = {"incident": incident, "alerts": []}
            entries.append(placed[incident.pk])
        placed[incident.pk]["alerts"].append(alert)
    members = defaultdict(list)  # every incident's alerts in one query, not one per incident on the page
    # Only what blast_radius reads, as plain rows: an incident on the page can hold dozens of alerts (33 a run in
    # benchmarks/read_paths.py), and 1,700 model instances (with their rules) cost the page ~80 ms.
    rules = {}
    for pk, incident_id, metric, component, magnitude, first_step, rule_id, kind, name in (
            Alert.objects.filter(incident__in=list(placed)).order_by()
            .values_list("pk", "incident_id", "metric", "component", "magnitude", "first_step", "rule_id", "rule__kind", "rule__name")):
        rule = rules.get(rule_id) or rules.setdefault(rule_id, SimpleNamespace(kind=kind, name=name))
        members[incident_id].append(_Member(pk, metric, component, magnitude, first_step, rule))
    for entry in placed.values():
        incident = entry["incident"]
        incident.can_act = may_act(incident.run.project)
        incident.alert_count = len(members[incident.pk])  # every alert of it was read above: no COUNT joining all alerts
        incident.count_words = f"{incident.alert_count} alert{'' if incident.alert_count == 1 else 's'}"
        incident.failed = failed_on("incident", incident.pk)
        incident.failed_action = incident.failed["action"] if incident.failed else ""
        incident.origin_text = incidents.describe_origin(incident.origin) if incident.origin else "—"
        incident.reach = incidents.blast_radius(members[incident.pk], incident.origin) if incident.origin else []
        # Shown open when one of its rows holds a refused form, so the error is seen.
        incident.expanded = incident.failed is None and any(a.failed for a in entry["alerts"])
    return entries


@login_required
def inbox(request):
    return _render_inbox(request)


PANEL_ACTIONS = ("verdict", "new_normal", "mute")


def _action(name, fields, act, done, kind="alert"):
    """A POST-only view: visible alert or incident (404), can_triage (403), act, then a message and back to the inbox."""
    find = triage.visible_alert if kind == "alert" else incidents.visible_incident

    # The actions with a form panel (verdict, new normal, mute) also answer GET: see below.
    methods = ["GET", "POST"] if name in PANEL_ACTIONS else ["POST"]

    @login_required
    @require_http_methods(methods)
    def view(request, pk):
        target = find(request.user, pk)
        if not can_triage(request.user, target.run.project):
            raise PermissionDenied(f"acting on {kind}s needs the on-call or rule admin role in this project")
        # A form on the incident's page names it as `next`: the reviewer is sent back there, whatever the outcome;
        # the inbox's forms name nothing and answer on the inbox as it was filtered.
        back = back_to(request, None)
        if request.method == "GET":
            # Without JavaScript the inbox's rows carry a link here instead of their forms (static/js/inbox-panels.js
            # fills those in): the inbox again, with this one's form rendered and open.
            return _render_inbox(request, failed=((kind, target.pk), name, {}, {}, []))
        try:
            result = act(target, request.user, request.POST)
        except ValidationError as exc:
            errors = {field: " ".join(msgs) for field, msgs in exc.message_dict.items()}
            inline = {field: msg for field, msg in errors.items() if field in fields}
            if not inline or back:  # a state it is in (e.g. resolved meanwhile), or a form of another page: say so at the top
                for field, msg in errors.items():
                    messages.error(request, f"{kind.capitalize()} {target.pk}: {_field_words(field, fields)}{msg}")
                return redirect(back or _inbox_url(request))
            values = {field: request.POST.get(field, "") for field in fields}
            other = [msg for field, msg in errors.items() if field not in fields]
            return _render_inbox(request, failed=((kind, target.pk), name, inline, values, other), status=400)
        level, text = done(target, result)
        messages.add_message(request, level, text)
        return redirect(back or _inbox_url(request))

    view.__name__ = f"inbox_{kind}_{name}"
    return view


FIELD_WORDS = {"verdict": "Verdict", "note": "Note", "scope": "Scope", "reason": "Reason", "duration_minutes": "Until",
               "expires_at": "Chosen end"}


def _field_words(field, fields):
    """A refused form field's label, as its page shows it, ahead of the message: "Note: …"."""
    return f"{FIELD_WORDS.get(field, field)}: " if field in fields else ""


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
new_normal = _action(
    "new_normal", ["note"],
    lambda alert, user, post: rebaseline.accept_new_normal(alert, user, post.get("note", "")),
    lambda alert, change: (messages.SUCCESS, f"{_label(alert)}: the level from step {change.step} is the new normal; "
                                             f"its band starts again from the next points."),
)
verdict = _action(
    "verdict", ["verdict", "note"],
    lambda alert, user, post: triage.give_verdict(alert, user, post.get("verdict"), post.get("note", "")),
    lambda alert, change: (messages.SUCCESS, f"Verdict on {_label(alert)}: {Verdict(change.verdict).label.lower()}."),
)


def _mute(alert, user, post):
    try:
        return triage.mute(alert, user, post.get("scope"), post.get("reason", ""), **_mute_end(post))
    except ValidationError as exc:
        raise ValidationError(_duration_words(exc.message_dict, post)) from None


mute = _action(
    "mute", ["scope", "reason", "duration_minutes", "expires_at"],
    _mute,
    lambda alert, created: (
        messages.SUCCESS,
        f"Muted {alert.rule.name} ({MuteScope(created.scope).label.lower()} scope) until "
        f"{when_text(created.expires_at)}; {len(created.muted)} open alert{pluralize(len(created.muted))} muted.",
    ),
)


def _mute_end(post):
    """The form's end of a mute: one of the offered durations, or a chosen end (a datetime-local input, read as UTC)."""
    return {"duration_minutes": post.get("duration_minutes") or None, "expires_at": post.get("expires_at") or None}


def _duration_words(errors, post):
    """The page asks for a duration or a chosen end: a missing or bad expiry is said in its words, on its field."""
    if post.get("expires_at") and "expires_at" in errors:
        if post.get("duration_minutes"):
            errors["expires_at"] = ["choose a duration or an end, not both"]
        else:
            errors["expires_at"] = [m.replace("expires_at (or duration_minutes)", "the end").replace("expires_at", "the chosen end")
                                    .replace("an ISO 8601 date-time, e.g. 2026-12-01T18:00:00Z", "a date and time")
                                    for m in errors["expires_at"]]
        return errors
    if "expires_at" in errors:
        del errors["expires_at"]
        errors["duration_minutes"] = [
            f"choose when the mute ends (at most {triage.max_duration_words()} ahead); there is no indefinite mute"
        ]
    return errors


def _count(n, word):
    return f"{n} {word}{pluralize(n)}"


def _incident_label(incident):
    return f"incident #{incident.pk} on {incident.run.run_id}"


def _mute_incident(incident, user, post):
    try:
        return incident_actions.mute_incident(incident, user, post.get("scope"), post.get("reason", ""), **_mute_end(post))
    except ValidationError as exc:
        raise ValidationError(_duration_words(exc.message_dict, post)) from None


incident_acknowledge = _action(
    "acknowledge", [],
    lambda incident, user, post: incident_actions.acknowledge_incident(incident, user),
    lambda incident, rows: (messages.SUCCESS, f"Acknowledged {_incident_label(incident)}: {len(rows)} alert{pluralize(len(rows))}.") if rows
    else (messages.INFO, f"{_incident_label(incident).capitalize()} was acknowledged already."),
    kind="incident",
)
incident_verdict = _action(
    "verdict", ["verdict", "note"],
    lambda incident, user, post: incident_actions.give_incident_verdict(incident, user, post.get("verdict"), post.get("note", "")),
    lambda incident, rows: (messages.SUCCESS, f"Verdict on {_incident_label(incident)} ({len(rows)} alert{pluralize(len(rows))}): "
                                              f"{Verdict(rows[0].verdict).label.lower()}."),
    kind="incident",
)
incident_mute = _action(
    "mute", ["scope", "reason", "duration_minutes", "expires_at"],
    _mute_incident,
    lambda incident, mutes: (
        messages.SUCCESS,
        f"Muted {_incident_label(incident)} ({MuteScope(mutes[0].scope).label.lower()} scope) until "
        f"{when_text(mutes[0].expires_at)}; {_count(sum(len(m.muted) for m in mutes), 'open alert')} muted.",
    ),
    kind="incident",
)


def runbook(request, name):
    """The starter rules' runbooks: generic guidance, no project data, so readable from a page's link without login."""
    page = RUNBOOKS.get(name)
    if page is None:
        raise Http404(f"no runbook named {name!r}")
    rule = page["rule"]
    return render(request, "alerts/runbook.html", {
        "name": name, "page": page,
        "kind_words": describe.kind_words(rule["kind"], rule.get("params")),
        "scope_rows": describe.scope_rows(rule["scope"], rule["kind"]),
        "persistence_words": describe.persistence_words(rule["persistence"]),
        "param_rows": describe.param_rows(rule.get("params")),
    })


# --- mutes ---------------------------------------------------------------------
# A project's mutes (active, ended or all) and one mute with its history, the alerts it held and its comment
# log; members read, on-call and rule admins comment (the same rule as the API, alerts/api.py).

MUTE_STATUSES = ["active", "ended", "all"]


@login_required
def mute_list(request):
    projects = visible_projects(request.user)
    status = request.GET.get("status") or "active"
    if status not in MUTE_STATUSES:
        status = "active"
    project = None
    if request.GET.get("project"):
        project = get_object_or_404(projects, slug=request.GET["project"])
    mutes = Mute.objects.filter(project__in=[project] if project else projects)
    now = timezone.now()
    if status == "active":
        mutes = mutes.active(now)
    elif status == "ended":
        mutes = mutes.exclude(pk__in=Mute.objects.active(now))
    mutes = mutes.select_related("project", "rule", "run", "created_by", "ended_by").annotate(held=Count("holds"))
    return render(request, "alerts/mutes.html", {
        "mutes": mutes.order_by("-created_at", "-id"), "project": project, "projects": projects,
        "status": status, "statuses": MUTE_STATUSES, "now": now,
    })


def _visible_mute(request, pk):
    mutes = Mute.objects.filter(project__in=visible_projects(request.user))
    return get_object_or_404(mutes.select_related("project", "rule", "run", "created_by", "ended_by", "extends"), pk=pk)


def _render_mute(request, mute, status=200, error="", text=""):
    return render(request, "alerts/mute_detail.html", {
        "mute": mute,
        "active": mute.ended_at is None and mute.expires_at > timezone.now(),
        "end_reason": MuteEndReason(mute.end_reason).label if mute.end_reason else "",
        "extensions": mute.extensions.order_by("id"),
        "holds": mute.holds.select_related("alert__run").order_by("at", "id"),
        "comments": mute.comments.select_related("by"),
        "can_comment": can_triage(request.user, mute.project),
        "error": error, "text": text,
    }, status=status)


@login_required
def incident_detail(request, pk):
    """One incident, for its project's members (404 for others): its alerts, its history and its actions."""
    incident = incidents.visible_incident(request.user, pk)
    return render(request, "alerts/incident.html", incident_page(incident, can_triage(request.user, incident.run.project)))


@login_required
def mute_detail(request, pk):
    return _render_mute(request, _visible_mute(request, pk))


@login_required
@require_POST
def mute_comment(request, pk):
    mute = _visible_mute(request, pk)
    if not can_triage(request.user, mute.project):
        raise PermissionDenied("commenting on mutes needs the on-call or rule admin role in this project")
    try:
        triage.comment_on_mute(mute, request.user, request.POST.get("text", ""))
    except ValidationError as exc:
        message = " ".join(exc.message_dict.get("text", [])) or " ".join(m for ms in exc.message_dict.values() for m in ms)
        return _render_mute(request, mute, status=400, error=message, text=request.POST.get("text", ""))
    messages.success(request, f"Comment added to mute #{mute.pk}.")
    return redirect("console:mute", pk=mute.pk)
