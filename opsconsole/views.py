from functools import wraps

from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import AuthenticationForm
from django.http import Http404
from django.shortcuts import get_object_or_404, render

from opsconsole.permissions import visible_runs
from opsconsole.run_page import run_page
from opsconsole.runs_list import runs_list
from opsconsole.throttle import LOGINS


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


def throttled_login(view):
    """A login view (the console's, the admin's) that counts failed attempts and refuses with 429 past the limit."""

    @wraps(view)
    def login(request, *args, **kwargs):
        if request.method != "POST":
            return view(request, *args, **kwargs)
        username = request.POST.get("username", "")
        wait = LOGINS.wait_for(request, username)
        if wait:
            response = render(request, "registration/login.html",
                              {"form": AuthenticationForm(request), "retry_minutes": -(-wait // 60)}, status=429)
            response["Retry-After"] = str(wait)
            return response
        response = view(request, *args, **kwargs)
        if response.status_code == 302 and request.user.is_authenticated:  # logged in: it redirects
            LOGINS.success(request, username)
        elif username:
            LOGINS.failure(request, username)
        return response

    return login
