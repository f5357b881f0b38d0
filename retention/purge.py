"""Deleting a run or a project without holding up ingest, and archiving what the decision log names.

Every delete goes in chunks of at most RETENTION_CHUNK_ROWS rows, each chunk its own short transaction,
biggest tables first (blocks, rollups, events, phases, receipts), so the last `delete()` that Django's
collector runs meets only the small rows (series, alerts, incidents, reviews) and never loads a run's
telemetry into memory: the admin's one-statement delete of a 30 M-point project grew a worker to 2.5 GB.

The decision log is append-only below the application and PROTECTs the run and project each entry is
written on. What it names (a run it is written on or links to, or a run one of whose alerts, incidents or
reviews it links to) is archived instead: its points and rollups go, and its identity, alerts,
incidents, reviews and log entries stay, with a RunArchive row saying when and why.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from alerts.models import Alert, Incident, RuleProgress
from ingest.models import BatchReceipt, Block, Event, IdentityChange, Phase, ProjectToken, Rollup, Series
from notifications.models import Delivery
from retention.models import ArchiveReason, ProjectArchive, RunArchive
from reviews.models import LogEntry, Review

# Rows whose delete goes through Django's collector (other tables point at them, with SET_NULL or CASCADE):
# each chunk costs a query per related table with every id in it, so these chunks are smaller.
COLLECTED_CHUNK = 500


def chunk_rows() -> int:
    return settings.RETENTION_CHUNK_ROWS


def delete_in_chunks(queryset, chunk: int | None = None) -> int:
    """Delete `queryset`'s rows a chunk at a time, each chunk in its own transaction; how many went."""
    chunk = chunk or chunk_rows()
    model, total = queryset.model, 0
    while True:
        with transaction.atomic():
            ids = list(queryset.order_by().values_list("pk", flat=True)[:chunk])
            if ids:
                model.objects.filter(pk__in=ids).delete()
        total += len(ids)
        if len(ids) < chunk:
            return total


@dataclass
class LogNames:
    """What the decision log names, read once per pass (the log is people's writing: thousands of rows, not millions)."""

    run_pks: set = field(default_factory=set)
    run_ids: set = field(default_factory=set)
    alerts: set = field(default_factory=set)
    incidents: set = field(default_factory=set)
    reviews: set = field(default_factory=set)

    @classmethod
    def read(cls) -> LogNames:
        names = cls()
        for run_pk, review_pk, links in LogEntry.objects.values_list("run_id", "review_id", "links").iterator():
            names.run_pks.add(run_pk)
            if review_pk is not None:
                names.reviews.add(review_pk)
            links = links if isinstance(links, dict) else {}
            names.run_ids.update(links.get("runs") or ())
            names.alerts.update(links.get("alerts") or ())
            names.incidents.update(links.get("incidents") or ())
            names.reviews.update(links.get("reviews") or ())
        return names

    def names_run(self, run) -> bool:
        return (run.pk in self.run_pks or run.run_id in self.run_ids
                or Alert.objects.filter(run=run, pk__in=self.alerts).exists()
                or Incident.objects.filter(run=run, pk__in=self.incidents).exists()
                or Review.objects.filter(run=run, pk__in=self.reviews).exists())

    def named_runs(self, runs) -> set[int]:
        """The pks of those of `runs` (a queryset) the log names."""
        named = set(runs.filter(pk__in=self.run_pks).values_list("pk", flat=True))
        named |= set(runs.filter(run_id__in=self.run_ids).values_list("pk", flat=True))
        for model, ids in ((Alert, self.alerts), (Incident, self.incidents), (Review, self.reviews)):
            named |= set(model.objects.filter(run__in=runs, pk__in=ids).values_list("run_id", flat=True))
        return named


def delete_points(run) -> dict:
    """Drop a run's raw points and rollups, and the evaluation state kept beside them."""
    series = list(Series.objects.filter(run=run).values_list("pk", flat=True))
    return {
        "blocks": delete_in_chunks(Block.objects.filter(series_id__in=series)) if series else 0,
        "rollups": delete_in_chunks(Rollup.objects.filter(series_id__in=series)) if series else 0,
        "rule_progress": delete_in_chunks(RuleProgress.objects.filter(run=run), COLLECTED_CHUNK),
    }


def archive(run, reason: str, *, by=None, at=None) -> RunArchive:
    """Mark the run archived (once: the first archive's date and reason stay)."""
    archived, _ = RunArchive.objects.get_or_create(run=run, defaults={"archived_at": at or timezone.now(), "reason": reason, "by": by})
    return archived


@dataclass
class Outcome:
    run: str
    archived: bool
    deleted: dict

    def as_dict(self) -> dict:
        return {"run": self.run, "archived": self.archived, "deleted": self.deleted}


def delete_run(run, *, by=None, names: LogNames | None = None) -> Outcome:
    """Delete the run in chunks, or archive it when the decision log names it. Safe to run again."""
    names = names or LogNames.read()
    deleted = delete_points(run)
    if names.names_run(run):
        archive(run, ArchiveReason.DELETED, by=by)
        return Outcome(run.run_id, True, deleted)
    deleted["events"] = delete_in_chunks(Event.objects.filter(run=run))
    deleted["phases"] = delete_in_chunks(Phase.objects.filter(run=run))
    deleted["identity_changes"] = delete_in_chunks(IdentityChange.objects.filter(run=run))
    deleted["receipts"] = delete_in_chunks(BatchReceipt.objects.filter(run=run), COLLECTED_CHUNK)
    deleted["alerts"] = delete_in_chunks(Alert.objects.filter(run=run), COLLECTED_CHUNK)
    # What is left is small: series, attempts, incidents, reviews, mutes. One transaction.
    with transaction.atomic():
        run.delete()
    return Outcome(run.run_id, False, deleted)


@dataclass
class ProjectOutcome:
    project: str
    archived: bool
    runs_deleted: int
    runs_archived: int

    def as_dict(self) -> dict:
        return {"project": self.project, "archived": self.archived, "runs_deleted": self.runs_deleted,
                "runs_archived": self.runs_archived}


def delete_project(project, *, by=None) -> ProjectOutcome:
    """Delete the project, run by run in chunks; a project whose decision log holds entries is archived instead.

    Its tokens are revoked first, so no job writes into it while it goes.
    """
    now = timezone.now()
    ProjectToken.objects.filter(project=project, revoked_at__isnull=True).update(revoked_at=now)
    names = LogNames.read()
    deleted = archived = 0
    for run in list(project.runs.all()):
        outcome = delete_run(run, by=by, names=names)
        archived += outcome.archived
        deleted += not outcome.archived
    if archived or LogEntry.objects.filter(project=project).exists():
        ProjectArchive.objects.get_or_create(project=project, defaults={"archived_at": now, "by": by})
        return ProjectOutcome(project.slug, True, deleted, archived)
    delete_in_chunks(Delivery.objects.filter(channel__project=project))
    # Alerts went with the runs, so no rule is protected any more; the rest is settings-sized.
    with transaction.atomic():
        project.delete()
    return ProjectOutcome(project.slug, False, deleted, archived)
