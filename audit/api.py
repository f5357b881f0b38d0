"""The audit app's API: the rule report as JSON or CSV. Members of the project read it; anyone else gets 404."""
import csv
import io

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from audit.query import ReportQuerySerializer, read_report_query
from audit.report import CSV_COLUMNS, csv_row, report
from opsconsole.rest import OwnFormatParameter
from opsconsole.schema import ErrorBodySerializer, errors


def report_csv(data: dict) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    for row in data["rules"]:
        writer.writerow(csv_row(row))
    return out.getvalue()


class RuleReportView(OwnFormatParameter, APIView):

    @extend_schema(operation_id="reports_rules", parameters=[ReportQuerySerializer], responses={
        (200, "application/json"): OpenApiResponse(OpenApiTypes.OBJECT, description="{\"project\", \"owner\", \"since\", "
                                                   "\"until\", \"rules\": [one object per rule, with its flags], \"notification_failures\": "
                                                   "[{\"channel\", \"kind\", \"failed\"}: the project's channels with "
                                                   "incident messages of the period that failed for good]}"),
        (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="with format=csv: one line per rule"),
        (400, "application/json"): OpenApiResponse(ErrorBodySerializer, description=errors(400)[400].description),
        (404, "application/json"): OpenApiResponse(ErrorBodySerializer, description=errors(404)[404].description),
    })
    def get(self, request):
        """The rule audit report of a project (or of one owner's rules) for [since, until)."""
        project, period, owner, fmt = read_report_query(request.user, request.query_params.dict())
        data = report(project, period, owner)
        if fmt == "csv":
            response = HttpResponse(report_csv(data), content_type="text/csv; charset=utf-8")
            response["Content-Disposition"] = f'attachment; filename="rule-report-{project.slug}.csv"'
            return response
        return Response(data)
