from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import render

from opsconsole.permissions import visible_runs


@login_required
def runs(request):
    rows = visible_runs(request.user).order_by("-last_seen_at", "run_id")[:500]
    return render(request, "console/runs.html", {"runs": rows})


def runbook(request, name):
    """The starter rules' runbooks: generic guidance, no project data, so readable from a page's link without login."""
    from alerts.starter import RUNBOOKS

    page = RUNBOOKS.get(name)
    if page is None:
        raise Http404(f"no runbook named {name!r}")
    return render(request, "console/runbook.html", {"name": name, "page": page})
