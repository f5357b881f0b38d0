"""The run read API: runs, a run, its points and events (contract v1), and the console's chart data."""
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

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
    read_query,
)
from ingest.storage import read_points
from ingest.wire import event_as_dict, wire_value
from opsconsole.pagination import Pagination, paginated
from opsconsole.permissions import visible_runs
from opsconsole.schema import errors
from runs.chart import MAX_BUCKETS, band_for_chart, finite_or_none
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


class SeriesChartView(APIView):
    @extend_schema(operation_id="runs_series", parameters=[RUN_ID_PARAMETER, ChartQuerySerializer],
                   responses={200: OpenApiTypes.OBJECT, **errors(404)})
    def get(self, request, run_id):
        """One series downsampled to buckets (min, max, last, non-finite count each), optionally with its band."""
        run = get_object_or_404(visible_runs(request.user), run_id=run_id)
        query = read_query(request, ChartQuerySerializer)
        metric, component, start, end, buckets = (query.get(k) for k in ("metric", "component", "start", "end", "buckets"))
        series = get_object_or_404(Series.objects.select_related("run"), run=run, metric=metric, component=component)
        data = series_buckets(series, start, end, buckets)
        body = {
            "run": run.run_id,
            "metric": metric,
            "component": component or None,
            "layer": series.layer,
            "resolution": data.resolution,
            "bucket_steps": data.bucket_steps,
            "step": data.step.tolist(),
            "min": finite_or_none(data.min),
            "max": finite_or_none(data.max),
            "last": [wire_value(v) for v in data.last.tolist()],
            "nonfinite": data.nonfinite.tolist(),
        }
        if query["band"]:
            body["band"] = band_for_chart(series, data, start, end, buckets)
        return Response(body)
