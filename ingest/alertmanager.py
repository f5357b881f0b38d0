"""Prometheus Alertmanager webhook (contract v1): each alert becomes a system-layer event.

The run comes from the alert's `run` label (else the project's `unassigned`
run), the component from its `component`, `instance` or `gpu` label. A
`resolved` notification closes the open event with the same fingerprint.
"""
from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from ingest.auth import ProjectTokenAuthentication
from ingest.contract import COMPONENT_RE, CONDITIONS, RUN_ID_RE, Batch, ContractError, check_body_size, loads
from ingest.models import BatchReceipt, Condition, Event, EventSource, Layer, Run
from ingest.service import RunOfAnotherProject, locked_run, queue_evaluation
from ingest.views import HasProjectToken, request_body



def unassigned_run_id(project) -> str:
    # Run ids are unique across the console, so each project's `unassigned` run carries its slug.
    return f"{project.slug}/unassigned"

COMPONENT_LABELS = ("component", "instance", "gpu")


def _timestamp(value, path, errors):
    if value in (None, "", "0001-01-01T00:00:00Z"):  # Alertmanager's "unset"
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00")) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        errors.append({"path": path, "message": f"must be an RFC 3339 time, got {value!r}"})
        return None
    return parsed.timestamp()


def parse_webhook(body: bytes, default_run: str) -> list[dict]:
    """Validate an Alertmanager payload into plain alert dicts, or raise ContractError naming every bad field."""
    check_body_size(len(body))
    if not body.strip():
        raise ContractError([{"path": "", "message": "empty body: send Alertmanager's webhook JSON"}])
    payload = loads(body)
    if type(payload) is not dict:
        raise ContractError([{"path": "", "message": "the body must be a JSON object"}])
    errors = []
    if payload.get("version") != "4":
        errors.append({"path": "version", "message": f'only webhook version "4" is understood, got {payload.get("version")!r}'})
    alerts = payload.get("alerts")
    if type(alerts) is not list:
        errors.append({"path": "alerts", "message": "alerts must be an array"})
        raise ContractError(errors)
    parsed = []
    for i, alert in enumerate(alerts):
        path = f"alerts[{i}]"
        if type(alert) is not dict:
            errors.append({"path": path, "message": "an alert must be an object"})
            continue
        status = alert.get("status")
        if status not in ("firing", "resolved"):
            errors.append({"path": f"{path}.status", "message": f'status must be "firing" or "resolved", got {status!r}'})
        labels = alert.get("labels") or {}
        annotations = alert.get("annotations") or {}
        if type(labels) is not dict:
            errors.append({"path": f"{path}.labels", "message": "labels must be an object"})
            labels = {}
        if type(annotations) is not dict:
            errors.append({"path": f"{path}.annotations", "message": "annotations must be an object"})
            annotations = {}
        run_id = labels.get("run") or default_run
        if not RUN_ID_RE.fullmatch(str(run_id)):
            errors.append({"path": f"{path}.labels.run", "message": f"run label {run_id!r} is not a valid run id"})
        component = next((labels[k] for k in COMPONENT_LABELS if labels.get(k)), labels.get("alertname") or "unknown")
        component = str(component)
        if not COMPONENT_RE.fullmatch(component):
            component = "".join(c if COMPONENT_RE.fullmatch(c) else "_" for c in component)[:256] or "unknown"
        condition = labels.get("condition") if labels.get("condition") in CONDITIONS else Condition.UNCLASSIFIED
        try:
            magnitude = float(annotations.get("value", labels.get("magnitude", 1.0)))
        except (TypeError, ValueError):
            magnitude = 1.0
        step = labels.get("step")
        parsed.append(
            {
                "status": status,
                "run_id": str(run_id),
                "component": component,
                "condition": condition,
                "magnitude": magnitude,
                "step": int(step) if str(step or "").isdigit() else None,
                "starts_at": _timestamp(alert.get("startsAt"), f"{path}.startsAt", errors),
                "ends_at": _timestamp(alert.get("endsAt"), f"{path}.endsAt", errors),
                "fingerprint": str(alert.get("fingerprint") or "")[:64],
                "detail": {"labels": labels, "annotations": annotations, "generatorURL": alert.get("generatorURL")},
            }
        )
    if errors:
        raise ContractError(errors)
    return parsed


def store_alerts(project, alerts: list[dict], now=None) -> int:
    """Store each alert as an event of its run; resolved ones close the matching open event."""
    now = now or timezone.now()
    received_at = now.timestamp()
    stored = 0
    with transaction.atomic():
        for run_id in sorted({a["run_id"] for a in alerts}):
            run = locked_run(project, Batch(run={"id": run_id}), now)
            mine = [a for a in alerts if a["run_id"] == run_id]
            receipt = BatchReceipt.objects.create(run=run, received_at=now, events=len(mine), max_step=run.max_step)
            for alert in mine:
                step = alert["step"] if alert["step"] is not None else max(run.max_step or 0, 0)
                open_event = None
                if alert["fingerprint"]:
                    open_event = Event.objects.filter(run=run, fingerprint=alert["fingerprint"], ended_at__isnull=True).first()
                if alert["status"] == "resolved" and open_event is not None:
                    Event.objects.filter(pk=open_event.pk, ended_at__isnull=True).update(ended_at=alert["ends_at"] or received_at)
                    continue
                if alert["status"] == "firing" and open_event is not None:
                    continue  # Alertmanager repeats firing alerts; one event per alert
                Event.objects.create(
                    run=run,
                    source=EventSource.ALERTMANAGER,
                    layer=Layer.SYSTEM,
                    attempt=run.attempt,
                    step=step,
                    component=alert["component"],
                    condition=alert["condition"],
                    magnitude=alert["magnitude"],
                    time=alert["starts_at"] or received_at,
                    detail=alert["detail"],
                    receipt=receipt,
                    fingerprint=alert["fingerprint"],
                    ended_at=(alert["ends_at"] or received_at) if alert["status"] == "resolved" else None,
                )
                stored += 1
            Run.objects.filter(pk=run.pk).update(last_seen_at=now)
            transaction.on_commit(lambda rid=receipt.id: queue_evaluation(rid), robust=True)
    return stored


class AlertmanagerView(APIView):
    authentication_classes = [ProjectTokenAuthentication]
    parser_classes = []

    permission_classes = [HasProjectToken]

    @extend_schema(request=OpenApiTypes.OBJECT, responses={202: OpenApiTypes.OBJECT, 400: OpenApiTypes.OBJECT})
    def post(self, request):
        """Prometheus Alertmanager webhook receiver (payload version 4)."""
        try:
            alerts = parse_webhook(request_body(request), unassigned_run_id(request.user.project))
            stored = store_alerts(request.user.project, alerts)
        except ContractError as exc:
            return Response({"errors": exc.errors}, status=exc.status)
        except RunOfAnotherProject:
            return Response({"errors": [{"path": "alerts[].labels.run", "message": "a run label names a run of another project"}]}, status=403)
        return Response({"accepted": {"alerts": len(alerts), "events": stored}}, status=202)
