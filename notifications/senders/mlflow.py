"""The MLflow sender: an incident written onto the MLflow run of the job, as tags and a metric.

The MLflow run is `target.config["runs"][<our run id>]` when the channel maps it, else the job's own tag
`mlflow_run_id` (`message.run_tags`). One `runs/log-batch` call writes, for incident <id>:

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
import urllib.error
import urllib.request
from urllib.parse import urlsplit

import orjson

from ingest.wire import wire_value
from notifications.message import ChannelTarget, DeliveryOutcome, IncidentMessage, NotifyEvent

PREFIX = "warninglight.incident"
METRIC = "warninglight.incident_magnitude"
LOG_BATCH = "/api/2.0/mlflow/runs/log-batch"


def mlflow_run_id(target: ChannelTarget, message: IncidentMessage) -> str:
    """The MLflow run to write to: the channel's mapping first, then the job's `mlflow_run_id` tag ("" for none)."""
    runs = target.config.get("runs")
    mapped = runs.get(message.run_id) if isinstance(runs, dict) else None
    found = mapped if mapped is not None else (message.run_tags or {}).get("mlflow_run_id")
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
        return DeliveryOutcome(ok=False, detail=f"no MLflow run for run {message.run_id}: the channel's config maps "
                                                f"none (runs) and the run has no mlflow_run_id tag")
    base = target.url.rstrip("/")
    if urlsplit(base).scheme not in ("http", "https"):
        return DeliveryOutcome(ok=False, detail="the MLflow tracking URI must be an http(s) URL of a tracking server")
    headers = {"Content-Type": "application/json", "User-Agent": "warning-light"}
    if target.secret:
        headers["Authorization"] = f"Bearer {target.secret}"
    request = urllib.request.Request(base + LOG_BATCH, data=orjson.dumps(log_batch_body(run_id, message)),
                                     headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=target.timeout) as answer:  # noqa: S310 (http(s) only, above)
            return DeliveryOutcome(ok=True, status_code=answer.status, detail=f"MLflow run {run_id}")
    except urllib.error.HTTPError as exc:
        return DeliveryOutcome(ok=False, retry=exc.code >= 500 or exc.code == 429, status_code=exc.code,
                               detail=f"MLflow answered {exc.code}: {_mlflow_error(exc)}")
    except (urllib.error.URLError, OSError) as exc:  # refused, unreachable, timed out
        return DeliveryOutcome(ok=False, retry=True, detail=f"MLflow unreachable: {getattr(exc, 'reason', exc)}")


def _mlflow_error(exc: urllib.error.HTTPError) -> str:
    """MLflow's own words ({"error_code", "message"}), or the status's reason; a short line."""
    try:
        body = orjson.loads(exc.read(4096) or b"{}")
        words = f"{body.get('error_code', '')}: {body.get('message', '')}".strip(": ")
    except (orjson.JSONDecodeError, AttributeError, OSError):
        words = ""
    return (words or str(exc.reason))[:300]
