"""The console's rules pages: list, detail, create, edit and delete, all through alerts/rules.py.

Members of a project read its rules; its rule admins create, edit and delete
them (others get 403, non-members 404). Every save goes through `save_rule`
(source "console"), so governance is checked as on every other path and each
change is a RuleRevision.
"""
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import ProtectedError
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse

from alerts import describe, faults
from alerts.forms import RuleForm
from alerts.models import Rule, RuleRevision
from alerts.rules import EDIT_DENIED, delete_rule, save_rule
from opsconsole.permissions import can_edit_rules, rule_admin_projects, visible_projects

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
    return render(request, "console/rules.html", {
        "rules": rules,
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
    return render(request, "console/rule_detail.html", {
        "rule": rule,
        "can_edit": can_edit_rules(request.user, rule.project),
        "scope_rows": describe.scope_rows(rule.scope, rule.kind),
        "targets": (rule.scope or {}).get("metrics") or (rule.scope or {}).get("conditions") or [],
        "persistence_words": describe.persistence_words(rule.persistence),
        "scope_json": describe.value_text(rule.scope),
        "persistence_json": describe.value_text(rule.persistence),
        "kind_words": describe.kind_words(rule.kind, rule.params),
        "response_words": describe.RESPONSE_WORDS.get(rule.permitted_response, ""),
        "param_rows": describe.param_rows(rule.params),
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
    return render(request, "console/rule_form.html", {"form": form, "rule": None})


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
    return render(request, "console/rule_form.html", {"form": form, "rule": rule})


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
    return render(request, "console/rule_delete.html", {"rule": rule, "alert_count": alert_count}, status=status)
