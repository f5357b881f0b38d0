from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from opsconsole.permissions import visible_runs


@login_required
def runs(request):
    rows = visible_runs(request.user).order_by("-last_seen_at", "run_id")[:500]
    return render(request, "console/runs.html", {"runs": rows})
