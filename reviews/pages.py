"""The reviews app's pages: a review, the decision log, a run's chronicle and a project's interruptions."""
from django.contrib.auth.decorators import login_required


# --- reviews and the decision log

@login_required
def review(request, pk):
    raise NotImplementedError


@login_required
def decision_log(request):
    raise NotImplementedError


# --- the chronicle and the postmortem

from django.shortcuts import get_object_or_404, render  # noqa: E402

from opsconsole.permissions import visible_projects, visible_runs  # noqa: E402
from reviews.chronicle import CAUSE_WINDOW_SECONDS, CAUSE_WINDOW_STEPS, cause_title  # noqa: E402
from reviews.patterns import project_patterns  # noqa: E402
from reviews.postmortem import postmortem  # noqa: E402


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
