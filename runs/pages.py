"""The runs app's HTML pages: the runs list and a run's page."""
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, render

from opsconsole.permissions import can_triage, visible_runs
from runs.compare import compare_choices
from runs.detail import run_page
from runs.summary import runs_list


@login_required
def runs(request):
    q = request.GET
    paging = q.copy()
    paging.pop("page", None)
    context = runs_list(request.user, q.get("project"), q.get("status"), q.get("tag"), q.get("q"), page=q.get("page"))
    return render(request, "runs/runs.html", {**context, "paging_query": paging.urlencode()})


@login_required
def run_detail(request, run_id):
    run = get_object_or_404(visible_runs(request.user), run_id=run_id)
    compare = compare_choices(request.user, run, request.GET.get("compare"), request.GET.get("compare_q"))
    return render(request, "runs/run.html", {**run_page(run), "may_review": can_triage(request.user, run.project), "compare": compare})
