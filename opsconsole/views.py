from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import get_object_or_404, render

from opsconsole.permissions import visible_runs
from opsconsole.run_page import run_page
from opsconsole.runs_list import runs_list


@login_required
def runs(request):
    q = request.GET
    return render(request, "console/runs.html", runs_list(request.user, q.get("project"), q.get("status"), q.get("tag")))


@login_required
def run_detail(request, run_id):
    run = get_object_or_404(visible_runs(request.user), run_id=run_id)
    return render(request, "console/run.html", run_page(run))


def runbook(request, name):
    """The starter rules' runbooks: generic guidance, no project data, so readable from a page's link without login."""
    from alerts.starter import RUNBOOKS

    page = RUNBOOKS.get(name)
    if page is None:
        raise Http404(f"no runbook named {name!r}")
    return render(request, "console/runbook.html", {"name": name, "page": page})
