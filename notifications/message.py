"""What a channel is given to send, and what it answers: the one interface between routing and the senders.

Routing (notifications/routing.py) turns an incident's change into an IncidentMessage; each channel kind's
sender turns that into its own wire format (webhook JSON, Slack blocks, Alertmanager alerts, email, MLflow tags)
and reports a DeliveryOutcome, which the delivery task records as one delivery-log row per try.
"""
from dataclasses import asdict, dataclass, field
from datetime import datetime

from django.db import models


class NotifyEvent(models.TextChoices):
    OPENED = "opened", "opened"      # the incident's first alert fired
    UPDATED = "updated", "updated"   # more alerts joined it, or it grew (rate-limited per incident)
    RESOLVED = "resolved", "resolved"  # the incident ended


@dataclass(frozen=True)
class IncidentMessage:
    event: str                # NotifyEvent
    incident_id: int
    project: str              # the project's slug
    run_id: str               # the job's own run id (ingest.Run.run_id)
    run_pk: int
    run_tags: dict            # ingest.Run.tags (MLflow reads tags["mlflow_run_id"])
    rule: str                 # the origin alert's rule name
    rule_kind: str
    severity: str             # the permitted response: notify | review
    component: str            # "" = the whole run
    metric: str
    step: int                 # the incident's first step (the origin alert's first step)
    magnitude: float | None
    magnitude_unit: str
    owner: str                # the rule's owner
    runbook_url: str          # the rule's diagnostic link
    run_url: str              # absolute: the run page at that step and component
    incident_url: str         # absolute: the console's page for the incident
    alerts: int               # alerts in the incident so far
    opened_at: datetime
    resolved_at: datetime | None = None
    summary: str = ""         # one line a person reads first
    labels: dict = field(default_factory=dict)  # run, component, rule, severity (+ project): Alertmanager's labels

    def as_json(self) -> dict:
        data = asdict(self)
        data["opened_at"] = self.opened_at.isoformat()
        data["resolved_at"] = self.resolved_at.isoformat() if self.resolved_at else None
        return data


@dataclass(frozen=True)
class DeliveryOutcome:
    ok: bool
    retry: bool = False       # worth trying again later (5xx, 429, timeout, refused connection)
    status_code: int | None = None
    detail: str = ""          # a short reason, shown on the console (never a secret)


@dataclass(frozen=True)
class ChannelTarget:
    """Where and how one channel sends: what a sender needs from the stored channel, and nothing else."""
    kind: str                 # the channel's kind (webhook, slack, alertmanager, email, mlflow)
    url: str                  # webhook / Slack URL, Alertmanager base URL, MLflow tracking URI ("" for email)
    secret: str = ""          # HMAC key, bearer token, ...; never logged or shown back
    config: dict = field(default_factory=dict)  # per kind: email recipients, extra labels, an MLflow run mapping
    timeout: float = 5.0      # seconds for one try
