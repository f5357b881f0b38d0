"""Backtests as jobs: started by a rule admin, run by a task within a budget, read by the project's members and token.

A backtest replays stored runs (alerts/backtest.py) and can take as long as the
runs are big, so it never runs inside a web request: `start` records a
BacktestJob (QUEUED) and queues `alerts.tasks.run_backtest`; the task claims it
(QUEUED -> RUNNING, a conditional update: a task delivered twice replays once)
and ends it DONE, CUT (the budget of BACKTEST_MAX_SECONDS / BACKTEST_MAX_POINTS
ran out; the result says how far it got) or FAILED. A project has at most
BACKTEST_MAX_PER_PROJECT queued or running at once; one more is refused
(TooManyBacktests, a 429), so one project cannot fill the workers with replays.
In the embedded console (no Redis) the task runs eagerly, as every task does.

While it runs, the task counts the runs replayed (`runs_done` of `runs_total`, one conditional UPDATE per run)
for the rule form and the API to show. A draft that edits a saved rule keeps the saved rule's fields at the
start (`saved`) and replays them run by run with the draft, so the result's `compared` says what the edit changes.
"""
import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from alerts import backtest
from alerts.models import ACTIVE_BACKTEST_STATES, BacktestJob, BacktestState, Rule
from ingest.models import Project
from opsconsole.permissions import visible_projects

log = logging.getLogger(__name__)

# The draft's fields a job keeps to judge with (the rest of a Rule is its bookkeeping).
DRAFT_FIELDS = ("name", "kind", "description", "owner", "scope", "persistence", "diagnostic_url",
                "permitted_response", "params", "enabled")
# A job still QUEUED this long after it was started was lost on the way to a worker (a broker that dropped it);
# one RUNNING this long past its time budget lost its worker. Either is failed, so it stops holding a place.
QUEUED_FOR_AT_MOST = timedelta(minutes=15)
RUNNING_PAST_BUDGET_AT_MOST = timedelta(minutes=5)


class TooManyBacktests(Exception):
    def __init__(self, project, active):
        limit = settings.BACKTEST_MAX_PER_PROJECT
        super().__init__(f"project {project.slug} has {active} backtest{'s' if active != 1 else ''} queued or running, "
                         f"at most {limit} at once: wait for one to finish")


def fail_lost(project):
    """Fail the project's jobs that can no longer finish (see QUEUED_FOR_AT_MOST); conditional, so a late finish wins."""
    now = timezone.now()
    lost = "lost: no worker finished it; start it again"
    BacktestJob.objects.filter(project=project, state=BacktestState.QUEUED, created_at__lt=now - QUEUED_FOR_AT_MOST) \
        .update(state=BacktestState.FAILED, finished_at=now, error=lost)
    running_for = timedelta(seconds=settings.BACKTEST_MAX_SECONDS) + RUNNING_PAST_BUDGET_AT_MOST
    BacktestJob.objects.filter(project=project, state=BacktestState.RUNNING, started_at__lt=now - running_for) \
        .update(state=BacktestState.FAILED, finished_at=now, error=lost)


def start(user, rule: Rule, runs, asked: dict, *, compared_with: Rule | None = None) -> BacktestJob:
    """Record a backtest of `rule` (saved, or an unsaved draft) over `runs` and queue it; TooManyBacktests past the limit.

    The caller has checked that `user` may edit the rule's project's rules. `compared_with`: the saved rule a draft
    edits; its fields as they are now are kept, and replayed over the same runs, so the result says what the edit
    changes (not for a saved rule's own backtest, nor a draft moved to another project: nothing to compare)."""
    project = rule.project
    if rule.pk or compared_with is None or compared_with.project_id != project.pk:
        compared_with = None
    with transaction.atomic():
        # Starts in one project wait for each other here, so two at once cannot both take the last place.
        Project.objects.select_for_update().filter(pk=project.pk).first()
        fail_lost(project)
        active = BacktestJob.objects.filter(project=project, state__in=ACTIVE_BACKTEST_STATES).count()
        if active >= settings.BACKTEST_MAX_PER_PROJECT:
            raise TooManyBacktests(project, active)
        job = BacktestJob.objects.create(
            project=project, rule=rule if rule.pk else None, started_by=user, created_at=timezone.now(),
            draft=None if rule.pk else {f: getattr(rule, f) for f in DRAFT_FIELDS},
            asked=asked, run_ids=[r.run_id for r in runs], runs_total=len(runs),
            compared_with=compared_with,
            saved=None if compared_with is None else {f: getattr(compared_with, f) for f in DRAFT_FIELDS},
        )
    return job  # QUEUED: alerts.tasks.start_backtest hands it to a worker


def queue_failed(job) -> None:
    """The broker could not take the job: it fails at once, since nothing would ever run it."""
    BacktestJob.objects.filter(pk=job.pk, state=BacktestState.QUEUED).update(
        state=BacktestState.FAILED, finished_at=timezone.now(), error="the task queue is unreachable; start it again later")


def run(job_id: int) -> bool:
    """Replay a queued job within its budget; False when it was not QUEUED (taken already, or failed as lost)."""
    claimed = BacktestJob.objects.filter(pk=job_id, state=BacktestState.QUEUED).update(
        state=BacktestState.RUNNING, started_at=timezone.now())
    if not claimed:
        return False
    job = BacktestJob.objects.select_related("project", "rule__project").get(pk=job_id)
    try:
        state, result, error = _replay(job)
    except Exception as exc:  # a backtest that breaks is a FAILED job, not a worker's crash
        log.exception("backtest %s failed", job_id)
        state, result, error = BacktestState.FAILED, None, f"{type(exc).__name__}: {exc}"
    BacktestJob.objects.filter(pk=job_id, state=BacktestState.RUNNING).update(
        state=state, result=result, error=error, finished_at=timezone.now())
    return True


def _replay(job):
    if job.draft is not None:
        rule = Rule(project=job.project, **job.draft)
    elif job.rule is not None:
        rule = job.rule
    else:
        return BacktestState.FAILED, None, "the rule was deleted before the backtest ran"
    saved = None
    if job.saved is not None:
        saved = Rule(pk=job.compared_with_id, project=job.project, **job.saved)
    by_id = {r.run_id: r for r in job.project.runs.filter(run_id__in=job.run_ids)}
    runs = [by_id[r] for r in job.run_ids if r in by_id]  # a run deleted since the start is not replayed
    running = BacktestJob.objects.filter(pk=job.pk, state=BacktestState.RUNNING)
    if len(runs) != job.runs_total:
        running.update(runs_total=len(runs))

    def on_run(done):
        # One conditional UPDATE per run, of the counter only: readers poll it; a job failed as lost stays failed.
        running.update(runs_done=done)

    budget = backtest.Budget(max_seconds=settings.BACKTEST_MAX_SECONDS, max_points=settings.BACKTEST_MAX_POINTS)
    result = backtest.backtest(rule, runs, budget, saved=saved, on_run=on_run)
    return (BacktestState.CUT if result["cut"] else BacktestState.DONE), result, ""


def visible(user, pk):
    """The job, if `user` (a member, a superuser, or the project's token) can see its project; else None."""
    return BacktestJob.objects.filter(pk=pk, project__in=visible_projects(user)).select_related(
        "project", "rule", "started_by").first()


def as_dict(job) -> dict:
    """A job as the API answers it; `result` is the synchronous backtest's old answer (with `points` and `cut`)."""
    return {
        "id": job.pk,
        "url": reverse("api:backtest-detail", args=[job.pk]),
        "project": job.project.slug,
        "rule": job.rule_id,
        "draft": job.draft,
        "asked": job.asked,
        "runs": job.run_ids,
        "started_by": job.started_by.get_username() if job.started_by else None,
        "state": job.state,
        "progress": {"runs_done": job.runs_done, "runs": job.runs_total, "message": job.progress},
        "compared_with": job.compared_with_id if job.saved is not None else None,
        "created_at": job.created_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
        "error": job.error,
        "result": job.result,
    }
