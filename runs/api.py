"""The run read API: runs, a run, its points and events (contract v1), and the console's chart data."""
from django.http import Http404
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response
from rest_framework.views import APIView

from ingest.contract import RUN_ID_RE
from ingest.downsample import series_buckets
from ingest.models import Event, Series
from ingest.serializers import (
    RUN_ID_PARAMETER,
    EventsQuerySerializer,
    EventsResponseSerializer,
    PointsQuerySerializer,
    PointsResponseSerializer,
    RunDetailSerializer,
    RunSummarySerializer,
    SeriesQuerySerializer,
    pattern_field,
    read_query,
)
from ingest.storage import read_points
from ingest.wire import event_as_dict, wire_value
from opsconsole.pagination import Pagination, paginated
from opsconsole.permissions import can_edit_rules, visible_runs
from opsconsole.schema import errors
from retention.tasks import delete_run_later
from runs.chart import MAX_BUCKETS, band_for_chart, finite_or_none
from runs.compare import compared_run, run_label
from runs.search import search_runs


SEARCH_PARAMETER = OpenApiParameter("q", str, description="only runs whose run id, name or a tag key or value contains this text (any case)")


class RunListView(APIView):
    pagination_class = Pagination

    @extend_schema(operation_id="runs_list", parameters=[SEARCH_PARAMETER], responses=RunSummarySerializer(many=True))
    def get(self, request):
        """The runs the caller may see, most recently active first, a page at a time: {count, next, previous, results}."""
        runs = search_runs(visible_runs(request.user).order_by("-last_seen_at", "run_id"), request.query_params.get("q"))
        return paginated(request, self, runs, lambda run: RunSummarySerializer(run).data)


class RunDetailView(APIView):
    @extend_schema(operation_id="runs_retrieve", parameters=[RUN_ID_PARAMETER], responses={200: RunDetailSerializer, **errors(404)})
    def get(self, request, run_id):
        run = get_object_or_404(visible_runs(request.user), run_id=run_id)
        return Response(RunDetailSerializer(run).data)

    @extend_schema(operation_id="runs_destroy", parameters=[RUN_ID_PARAMETER], responses={202: OpenApiTypes.OBJECT, **errors(403, 404)})
    def delete(self, request, run_id):
        """Delete a run (rule admins of its project): queued, then done by a worker in chunks. A run the decision
        log names is archived instead (`archived: true`): its points go; its identity, alerts, incidents,
        reviews and log entries stay."""
        run = get_object_or_404(visible_runs(request.user), run_id=run_id)
        if not can_edit_rules(request.user, run.project):
            raise PermissionDenied("only a rule admin of the run's project deletes a run")
        return Response(delete_run_later(run, by=request.user), status=202)


class PointsView(APIView):
    @extend_schema(operation_id="runs_points", parameters=[RUN_ID_PARAMETER, PointsQuerySerializer],
                   responses={200: PointsResponseSerializer, **errors(404)})
    def get(self, request, run_id):
        run = get_object_or_404(visible_runs(request.user), run_id=run_id)
        query = read_query(request, PointsQuerySerializer)
        metric, component, start, end = (query.get(key) for key in ("metric", "component", "start", "end"))
        all_attempts = query.get("attempt") == "all"
        series = Series.objects.filter(run=run, metric=metric, component=component).first()
        points = []
        if series is not None:
            steps, values, attempts = read_points(series, start=start, end=end, all_attempts=all_attempts)
            if all_attempts:
                points = [{"step": int(s), "value": wire_value(float(v)), "attempt": int(a)} for s, v, a in zip(steps, values, attempts)]
            else:
                points = [{"step": int(s), "value": wire_value(float(v))} for s, v in zip(steps, values)]
        return Response({"run": run.run_id, "metric": metric, "component": component or None, "points": points})


class EventsView(APIView):
    @extend_schema(operation_id="runs_events", parameters=[RUN_ID_PARAMETER, EventsQuerySerializer],
                   responses={200: EventsResponseSerializer, **errors(404)})
    def get(self, request, run_id):
        """Health events of a run in step order: reported by the job, or Alertmanager alerts (with when they ended)."""
        run = get_object_or_404(visible_runs(request.user), run_id=run_id)
        query = read_query(request, EventsQuerySerializer)
        events = Event.objects.filter(run=run).order_by("step", "id")
        if query.get("start") is not None:
            events = events.filter(step__gte=query["start"])
        if query.get("end") is not None:
            events = events.filter(step__lte=query["end"])
        if query.get("condition"):
            events = events.filter(condition=query["condition"])
        return Response(
            {
                "run": run.run_id,
                "events": [event_as_dict(e) for e in events[:10000]],
            }
        )


class ChartQuerySerializer(SeriesQuerySerializer):
    buckets = serializers.IntegerField(required=False, default=2000, min_value=1, max_value=MAX_BUCKETS,
                                       help_text="at most this many buckets")
    band = serializers.BooleanField(required=False, default=False, help_text="include the phase-aware band")
    compare = pattern_field(RUN_ID_RE, "compare", 128, required=False,
                            help_text="the same series of this other run of the same project, to draw beside this run's "
                                      "(the run page's Compare with); 404 for a run the caller may not compare with")


class SeriesChartView(APIView):
    @extend_schema(operation_id="runs_series", parameters=[RUN_ID_PARAMETER, ChartQuerySerializer],
                   responses={200: OpenApiTypes.OBJECT, **errors(404)})
    def get(self, request, run_id):
        """One series downsampled to buckets (min, max, last, non-finite count each), optionally with its band.

        With `compare`, the same series of that other run instead, never with a band (the band is this run's
        judgement): no such run, another project's and one the caller cannot see are the same 404, and a
        compared run that never sent the series answers empty lists (nothing to draw beside this one).
        """
        run = get_object_or_404(visible_runs(request.user), run_id=run_id)
        query = read_query(request, ChartQuerySerializer)
        metric, component, start, end, buckets = (query.get(k) for k in ("metric", "component", "start", "end", "buckets"))
        if query.get("compare"):
            return Response(self.compared(request, run, query["compare"], metric, component, start, end, buckets))
        series = get_object_or_404(Series.objects.select_related("run"), run=run, metric=metric, component=component)
        data, body = chart_body(series, start, end, buckets)
        if query["band"]:
            body["band"] = band_for_chart(series, data, start, end, buckets)
        return Response(body)

    @staticmethod
    def compared(request, run, compare_id, metric, component, start, end, buckets) -> dict:
        other = compared_run(request.user, run, compare_id)
        if other is None:
            raise Http404("No such run to compare with in this run's project.")
        series = Series.objects.select_related("run").filter(run=other, metric=metric, component=component).first()
        if series is None:
            return {"run": other.run_id, "name": run_label(other), "metric": metric, "component": component or None,
                    "layer": None, "resolution": None, "bucket_steps": None, "step": [], "min": [], "max": [], "last": [],
                    "nonfinite": []}
        return {**chart_body(series, start, end, buckets)[1], "name": run_label(other)}


def chart_body(series, start, end, buckets):
    """`series` in at most `buckets` buckets: series_buckets' answer, and the chart's JSON of it."""
    data = series_buckets(series, start, end, buckets)
    return data, {
        "run": series.run.run_id,
        "metric": series.metric,
        "component": series.component or None,
        "layer": series.layer,
        "resolution": data.resolution,
        "bucket_steps": data.bucket_steps,
        "step": data.step.tolist(),
        "min": finite_or_none(data.min),
        "max": finite_or_none(data.max),
        "last": [wire_value(v) for v in data.last.tolist()],
        "nonfinite": data.nonfinite.tolist(),
    }
