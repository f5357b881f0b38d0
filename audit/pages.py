"""The audit app's pages: the rule report (and its printable form), the sent weekly reports, alert fatigue."""
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from rest_framework.exceptions import ValidationError

from audit import fatigue
from audit.models import SentReport
from audit.query import read_report_query
from audit.report import report
from opsconsole.permissions import visible_projects


def _query(request):
    """(project, period, owner) or the page's 400 listing the bad fields."""
    try:
        project, period, owner, _ = read_report_query(request.user, request.GET.dict())
    except ValidationError as exc:
        return None, render(request, "audit/query_error.html", {"errors": exc.detail}, status=400)
    return (project, period, owner), None


@login_required
def reports_index(request):
    """Where the nav's Reports leads: each project the caller can see, with its reports one click away."""
    return render(request, "audit/reports.html", {"projects": visible_projects(request.user).order_by("slug")})


@login_required
def rule_report(request, printable=False):
    chosen, error = _query(request)
    if error:
        return error
    if request.GET.get("format") in ("csv", "json"):
        # The API builds the CSV and the JSON; the page's address with format= (as people type it) hands over to it.
        return redirect(reverse("api:reports-rules") + "?" + request.GET.urlencode())
    project, period, owner = chosen
    data = report(project, period, owner)
    export = request.GET.copy()
    export.pop("print", None)
    csv_query = export.copy()
    csv_query["format"] = "csv"
    template = "audit/report_print.html" if printable or request.GET.get("print") == "1" else "audit/report.html"
    return render(request, template, {
        "report": data, "project": project, "period": period, "owner": owner,
        "projects": visible_projects(request.user).order_by("slug"),
        "owners": sorted(set(project.rules.values_list("owner", flat=True))),
        "json_url": reverse("api:reports-rules") + "?" + export.urlencode(),
        "csv_url": reverse("api:reports-rules") + "?" + csv_query.urlencode(),
        "print_url": reverse("console:reports-rules-print") + "?" + export.urlencode(),
    })


@login_required
def rule_report_print(request):
    return rule_report(request, printable=True)


@login_required
def sent_reports(request):
    reports = SentReport.objects.filter(project__in=visible_projects(request.user)).select_related("project")
    if request.GET.get("project"):
        reports = reports.filter(project__slug=request.GET["project"])
    return render(request, "audit/sent.html", {"reports": reports[:200]})


@login_required
def sent_report(request, pk):
    sent = get_object_or_404(SentReport.objects.filter(project__in=visible_projects(request.user)), pk=pk)
    return render(request, "audit/sent_one.html", {"sent": sent})


@login_required
def fatigue_page(request):
    chosen, error = _query(request)
    if error:
        return error
    project, period, owner = chosen
    return render(request, "audit/fatigue.html", {
        "project": project, "period": period, "owner": owner,
        "projects": visible_projects(request.user).order_by("slug"),
        "figures": fatigue.fatigue(project, period, owner),
    })
