"""The reviews app's pages: a review, the decision log, a run's chronicle and a project's interruptions.

Forms post here and the domain (reviews/lifecycle.py) decides; a refused form is shown again with the
field named, a done one redirects (so a reload never posts twice).
"""
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from alerts.models import Rule
from ingest.models import Run
from opsconsole.next_page import back_to
from opsconsole.permissions import can_triage, visible_projects, visible_runs
from reviews import lifecycle
from reviews.chronicle import CAUSE_WINDOW_SECONDS, CAUSE_WINDOW_STEPS, cause_title
from reviews.forms import CheckForm, DecisionForm, EntryForm, LogFilterForm, ScheduleForm
from reviews.log import entries_for
from reviews.lifecycle import visible_reviews
from reviews.models import LogEntry, ReviewState, ReviewTrigger, rewind_words
from reviews.patterns import project_patterns
from reviews.postmortem import postmortem

# --- reviews and the decision log


def _review_or_404(request, pk):
    return get_object_or_404(visible_reviews(request.user), pk=pk)


def _acting(request, project):
    if not can_triage(request.user, project):
        raise PermissionDenied(lifecycle.TRIAGE_DENIED)


def _step_evidence(steps):
    """Every piece of evidence of steps 1-5, numbered "<step>.<index>" for the decision form's choices."""
    return [(f"{s.number}.{i}", s.number, e) for s in steps if s.number <= 5 for i, e in enumerate(s.evidence or [])]


@login_required
def review(request, pk, decision_form=None, status=200):
    review = _review_or_404(request, pk)
    steps = list(review.steps.select_related("checked_by"))
    for step in steps:
        step.facts = _facts(step.findings)
    evidence = _step_evidence(steps)
    may_act = can_triage(request.user, review.run.project)
    finished = lifecycle.run_finished(review.run)
    rewind = lifecycle.proposed_rewind(review) if review.state == ReviewState.OPEN else None
    form = decision_form or DecisionForm(
        evidence=evidence, rules=_rule_names(review.run), initial={"owner": review.run.project.owner_name},
        run_finished=finished, rewind_proposed=rewind is not None,
    )
    comparisons = Run.objects.filter(project=review.run.project).exclude(pk=review.run_id).order_by("-reference", "run_id")[:200]
    entry = LogEntry.objects.filter(review=review).prefetch_related("corrections").first()
    if entry is not None:
        entry.corrected = lifecycle.corrected_decision(entry)
    return render(request, "reviews/review.html", {
        "review": review,
        "run": review.run,
        "steps": steps,
        "decision_form": form,
        "may_act": may_act and review.state == ReviewState.OPEN,
        "activity": review.activity.select_related("by"),
        "entry": entry,
        "comparisons": comparisons,
        "last_checkpoint": _last_checkpoint(review.run),
        "rewind": rewind_words(rewind),
        "intervene_warning": lifecycle.INTERVENE_WARNING,
        "finished_warning": lifecycle.FINISHED_WARNING if finished else None,
        "trigger_words": lifecycle.TRIGGER_WORDS[review.trigger],
    }, status=status)


TABLE_KEYS = ("columns", "rows", "sections")


def _facts(findings) -> list[tuple[str, str]]:
    """A step's findings beyond its tables, as (name, value) lines: scalars as they are, small objects flattened."""
    facts = []
    for key, value in (findings or {}).items():
        if key in TABLE_KEYS or value in (None, "", [], {}):
            continue
        if isinstance(value, dict):
            facts += [(f"{key} {k}".replace("_", " "), v) for k, v in value.items() if not isinstance(v, (dict, list)) and v is not None]
        elif not isinstance(value, list):
            facts.append((key.replace("_", " "), value))
    return facts


def _last_checkpoint(run):
    from reviews.steps.checkpoints import last_checkpoint_step

    return last_checkpoint_step(run)


def _rule_names(run):
    return list(Rule.objects.filter(project=run.project_id).order_by("name").values_list("name", flat=True))


@login_required
@require_POST
def review_start(request):
    run = get_object_or_404(visible_runs(request.user), run_id=request.POST.get("run", ""))
    _acting(request, run.project)
    try:
        incident = lifecycle.incident_of(run, request.POST.get("incident", "").strip())
    except ValidationError as exc:
        messages.error(request, "; ".join(f"{k}: {' '.join(map(str, v))}" for k, v in _errors(exc).items()))
        # Back where the form was (an incident's page names itself as `next`), else the run's page.
        return redirect(back_to(request, reverse("console:run", args=[run.run_id])))
    if incident is not None:  # "Review this incident": its open review if it has one
        started = lifecycle.review_incident(incident, by=request.user)
    else:
        started = lifecycle.open_review(run, ReviewTrigger.MANUAL, by=request.user)
    return redirect("console:review", pk=started.pk)


@login_required
@require_POST
def review_check(request, pk, number):
    review = _review_or_404(request, pk)
    _acting(request, review.run.project)
    form = CheckForm(request.POST)
    try:
        if not form.is_valid():
            raise ValidationError(form.errors.get_json_data())
        lifecycle.check_step(review, number, by=request.user, note=form.cleaned_data["note"])
        messages.success(request, f"Step {number} checked.")
    except ValidationError as exc:
        messages.error(request, "; ".join(f"{k}: {' '.join(map(str, v))}" for k, v in _errors(exc).items()))
    return redirect(reverse("console:review", args=[pk]) + f"#step-{number}")


@login_required
@require_POST
def review_compare(request, pk):
    review = _review_or_404(request, pk)
    _acting(request, review.run.project)
    run_id = request.POST.get("comparison", "")
    other = get_object_or_404(visible_runs(request.user), run_id=run_id) if run_id else None
    try:
        lifecycle.choose_comparison(review, other, by=request.user)
        messages.success(request, f"Compared with {other.run_id}." if other else "No comparison run.")
    except ValidationError as exc:
        messages.error(request, "; ".join(f"{k}: {' '.join(map(str, v))}" for k, v in _errors(exc).items()))
    return redirect("console:review", pk=pk)


@login_required
@require_POST
def review_decide(request, pk):
    review_row = _review_or_404(request, pk)
    _acting(request, review_row.run.project)
    evidence = _step_evidence(list(review_row.steps.all()))
    form = DecisionForm(request.POST, evidence=evidence, rules=_rule_names(review_row.run),
                        run_finished=lifecycle.run_finished(review_row.run))
    if form.is_valid():
        try:
            entry = lifecycle.decide(review_row, by=request.user, **form.domain_fields())
        except ValidationError as exc:
            form.add_domain_errors(exc)
        else:
            messages.success(request, f"Decision recorded: {entry.decision} (log entry #{entry.pk}).")
            return redirect("console:review", pk=pk)
    return review(request, pk, decision_form=form, status=400)


@login_required
@require_POST
def review_schedule(request):
    """A run's own review schedule, from its page (on-call and rule admins): set, or removed with "remove"."""
    run = get_object_or_404(visible_runs(request.user), run_id=request.POST.get("run", ""))
    _acting(request, run.project)
    if request.POST.get("remove"):
        if lifecycle.remove_schedule(run.project, run):
            messages.success(request, "This run's own review schedule is removed.")
        return redirect(reverse("console:run", args=[run.run_id]) + "#run-reviews")
    form = ScheduleForm(request.POST)
    try:
        if not form.is_valid():
            raise ValidationError({k: list(v) for k, v in form.errors.items()})
        schedule = lifecycle.set_schedule(run.project, run, by=request.user, **form.cleaned_data)
    except ValidationError as exc:
        messages.error(request, "; ".join(f"{k}: {' '.join(map(str, v))}" for k, v in _errors(exc).items()))
    else:
        parts = [f"every {schedule.every_steps:,} steps" if schedule.every_steps else "",
                 f"every {schedule.every_hours:g} hours" if schedule.every_hours else ""]
        messages.success(request, "Reviews of this run open " + " and ".join(p for p in parts if p) + ".")
    return redirect(reverse("console:run", args=[run.run_id]) + "#run-reviews")


def _errors(exc):
    return exc.message_dict if hasattr(exc, "error_dict") else {"": exc.messages}


@login_required
def decision_log(request, entry_form=None, status=200):
    filters = LogFilterForm(request.GET)
    chosen = filters.cleaned_data if filters.is_valid() else {}
    entries = entries_for(request.user, **{k: chosen.get(k) or None for k in ("run", "project", "decision", "owner", "since", "until")})
    run = None
    if chosen.get("run"):
        run = visible_runs(request.user).filter(run_id=chosen["run"]).first()
    may_write = run is not None and can_triage(request.user, run.project)
    if may_write and entry_form is None:
        corrects = request.GET.get("corrects")
        entry_form = EntryForm(rules=_rule_names(run), initial={
            "owner": run.project.owner_name, "corrects": corrects if corrects and corrects.isdigit() else None,
        })
    export = request.GET.copy()
    export["format"] = "jsonl"
    shown = list(entries[:500])
    for entry in shown:  # the decision that stands: a correction carrying one supersedes the entry's own
        entry.corrected = lifecycle.corrected_decision(entry)
    return render(request, "reviews/decisions.html", {
        "entries": shown,
        "filters": filters,
        "filter_errors": filters.errors if filters.is_bound and not filters.is_valid() else None,
        "projects": visible_projects(request.user).order_by("slug"),
        "run": run,
        "entry_form": entry_form if may_write else None,
        "export_url": reverse("api:decisions") + "?" + export.urlencode(),
        "reviews": visible_reviews(request.user).filter(run=run)[:50] if run else [],
    }, status=status)


@login_required
@require_POST
def decision_write(request):
    run = get_object_or_404(visible_runs(request.user), run_id=request.POST.get("run", ""))
    _acting(request, run.project)
    form = EntryForm(request.POST, rules=_rule_names(run))
    if form.is_valid():
        corrects = None
        if form.cleaned_data.get("corrects"):
            corrects = LogEntry.objects.filter(pk=form.cleaned_data["corrects"], run=run).first()
            if corrects is None:
                form.add_error("corrects", f"no entry #{form.cleaned_data['corrects']} in this run's log")
        if form.is_valid():
            try:
                entry = lifecycle.write_entry(run, by=request.user, corrects=corrects, **form.domain_fields())
            except ValidationError as exc:
                form.add_domain_errors(exc)
            else:
                messages.success(request, f"Log entry #{entry.pk} written.")
                return redirect(reverse("console:decisions") + f"?run={run.run_id}#entry-{entry.pk}")
    request.GET = request.GET.copy()
    request.GET["run"] = run.run_id
    return decision_log(request, entry_form=form, status=400)


# --- the chronicle and the postmortem

@login_required
def run_chronicle(request, run_id):
    run = get_object_or_404(visible_runs(request.user), run_id=run_id)
    data = postmortem(run)
    for row in data["attempts"]:
        row["cause_title"] = cause_title(row) if row["number"] > 1 else ""
        row["share_kept"] = row["steps_kept"] / row["steps_computed"] if row["steps_computed"] else None
    return render(request, "reviews/chronicle.html", {
        "run": run, "data": data, "window_steps": CAUSE_WINDOW_STEPS, "window_minutes": CAUSE_WINDOW_SECONDS // 60,
    })


@login_required
def project_interruptions(request, slug):
    project = get_object_or_404(visible_projects(request.user), slug=slug)
    return render(request, "reviews/interruptions.html", {"project": project, "patterns": project_patterns(project)})
