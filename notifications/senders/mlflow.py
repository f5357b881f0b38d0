"""The MLflow sender: an incident written onto the MLflow run of the job, as tags and a metric.

The MLflow run is `target.config["runs"][<our run id>]` when the channel maps it, else the job's own tag
`mlflow_run_id` (or the channel's `run_id_tag`; `message.run_tags`). One `runs/log-batch` call writes, for incident <id>:

    warninglight.incident.<id>.component   the component ("" for the whole run is written as "run")
    warninglight.incident.<id>.metric / .step / .magnitude (the contract's words for non-finite) / .unit
    warninglight.incident.<id>.rule / .severity / .url
    warninglight.incident.<id>.state        "open", then "resolved" when a resolved message comes
    metric warninglight.incident_magnitude  the magnitude at the incident's step (opened and updated messages)

MLflow's REST API (2.0) is called directly with urllib, not through the `mlflow` client: the client reads its
bearer token from the process's environment (one token for every channel of a worker), retries with its own
backoff past `target.timeout`, and would add some twenty packages to the console. Tags are set, not added, and
the metric is logged with the incident's own timestamp, so a retried or repeated delivery changes nothing.
"""
from dataclasses import replace
from urllib.parse import urlsplit

import orjson

from ingest.wire import wire_value
from notifications.message import ChannelTarget, DeliveryOutcome, IncidentMessage, NotifyEvent
from notifications.senders import post

PREFIX = "warninglight.incident"
METRIC = "warninglight.incident_magnitude"
LOG_BATCH = "/api/2.0/mlflow/runs/log-batch"
RUN_ID_TAG = "mlflow_run_id"  # the run tag holding the MLflow run id, unless the channel names another


def mlflow_run_id(target: ChannelTarget, message: IncidentMessage) -> str:
    """The MLflow run to write to: the channel's mapping first, then the job's run tag ("" for none)."""
    runs = target.config.get("runs")
    mapped = runs.get(message.run_id) if isinstance(runs, dict) else None
    tag = target.config.get("run_id_tag") or RUN_ID_TAG
    found = mapped if mapped is not None else (message.run_tags or {}).get(tag)
    return found.strip() if isinstance(found, str) else ""


def log_batch_body(run_id: str, message: IncidentMessage) -> dict:
    resolved = message.event == NotifyEvent.RESOLVED
    tags = {
        "component": message.component or "run",
        "metric": message.metric,
        "step": str(message.step),
        "magnitude": "none" if message.magnitude is None else str(wire_value(message.magnitude)),
        "unit": message.magnitude_unit,
        "rule": message.rule,
        "severity": message.severity,
        "state": "resolved" if resolved else "open",
        "url": message.incident_url,
    }
    body = {"run_id": run_id, "tags": [{"key": f"{PREFIX}.{message.incident_id}.{k}", "value": v} for k, v in tags.items()]}
    if not resolved and message.magnitude is not None:
        # MLflow's JSON reads doubles as protobuf does: "NaN" and "Infinity" are values, not errors.
        body["metrics"] = [{"key": METRIC, "value": wire_value(message.magnitude), "step": message.step,
                            "timestamp": int(message.opened_at.timestamp() * 1000)}]
    return body


def send(target: ChannelTarget, message: IncidentMessage) -> DeliveryOutcome:
    run_id = mlflow_run_id(target, message)
    if not run_id:
        tag = target.config.get("run_id_tag") or RUN_ID_TAG
        return DeliveryOutcome(ok=False, detail=f"no MLflow run for run {message.run_id}: the channel's config maps "
                                                f"none (runs) and the run has no {tag} tag")
    base = target.url.rstrip("/")
    if urlsplit(base).scheme not in ("http", "https"):
        return DeliveryOutcome(ok=False, detail="the MLflow tracking URI must be an http(s) URL of a tracking server")
    headers = {"Authorization": f"Bearer {target.secret}"} if target.secret else {}
    # MLflow's JSON reads doubles as protobuf does: "NaN" and "Infinity" are values, so orjson's nulls are avoided.
    outcome = post(base + LOG_BATCH, orjson.dumps(log_batch_body(run_id, message)), timeout=target.timeout,
                   headers=headers)
    return replace(outcome, detail=outcome.detail or f"MLflow run {run_id}")
