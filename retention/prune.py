"""Applying each project's retention policy: what aged out goes, in chunks, while ingest runs.

Idempotent: each pass deletes only what is older than its cutoffs, and remembers how far it got
(`points_pruned_before`, `rollups_pruned_before`) so the next pass reads only what aged since.

- Raw points (blocks) go by the day their batch arrived; a run whose last point is older than the cutoff
  is then archived (reason: retention), and its page says so. Rollups stay, so its charts still show the
  curve at wide zoom, until `rollup_retention_days` after its last point.
- Resolved alerts and incidents go `alert_retention_days` / `incident_retention_days` after they resolved,
  and reviews that were never decided `review_retention_days` after they opened: never one the decision
  log names, nor any of a run it names.
"""
from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from alerts.models import Alert, AlertState, Incident, IncidentState
from ingest.models import BatchReceipt, Block, Rollup, Run, Series
from retention.models import ArchiveReason, RetentionPolicy
from retention.purge import COLLECTED_CHUNK, LogNames, archive, delete_in_chunks
from reviews.models import Review, ReviewState

# Receipts read at once when looking for aged blocks (each batch's blocks are then deleted in chunks).
RECEIPTS_AT_ONCE = 1000


def prune(now=None) -> dict[str, dict]:
    """Apply every project's policy; per project slug, how many rows of each kind went."""
    now = now or timezone.now()
    names = LogNames.read()
    return {policy.project.slug: prune_project(policy, now, names)
            for policy in RetentionPolicy.objects.select_related("project").order_by("project__slug")}


def prune_project(policy: RetentionPolicy, now, names: LogNames | None = None) -> dict:
    names = names or LogNames.read()
    project = policy.project
    counts = {}
    if policy.retention_days:
        cutoff = now - timedelta(days=policy.retention_days)
        counts["blocks"] = _prune_blocks(project, cutoff, policy.points_pruned_before)
        aged = Run.objects.filter(project=project, last_seen_at__lt=cutoff, archive__isnull=True)
        counts["runs_archived"] = 0
        for run in aged:
            archive(run, ArchiveReason.RETENTION, at=now)
            counts["runs_archived"] += 1
        policy.points_pruned_before = cutoff
    if policy.rollup_retention_days:
        cutoff = now - timedelta(days=policy.rollup_retention_days)
        runs = Run.objects.filter(project=project, last_seen_at__lt=cutoff)
        if policy.rollups_pruned_before:
            runs = runs.filter(last_seen_at__gte=policy.rollups_pruned_before)
        series = Series.objects.filter(run__in=runs)
        counts["rollups"] = delete_in_chunks(Rollup.objects.filter(series__in=series))
        # Rollups outlive raw points by the policy's rule, but a batch that came late may still hold some.
        counts["blocks"] = counts.get("blocks", 0) + delete_in_chunks(Block.objects.filter(series__in=series))
        policy.rollups_pruned_before = cutoff
    policy.save(update_fields=["points_pruned_before", "rollups_pruned_before"])

    runs = Run.objects.filter(project=project)
    named_runs = names.named_runs(runs)
    if policy.alert_retention_days:
        cutoff = now - timedelta(days=policy.alert_retention_days)
        alerts = (Alert.objects.filter(run__project=project, state=AlertState.RESOLVED, resolved_at__lt=cutoff)
                  .exclude(pk__in=names.alerts).exclude(run_id__in=named_runs))
        counts["alerts"] = delete_in_chunks(alerts, COLLECTED_CHUNK)
    if policy.incident_retention_days:
        cutoff = now - timedelta(days=policy.incident_retention_days)
        incidents = (Incident.objects.filter(run__project=project, state=IncidentState.RESOLVED, resolved_at__lt=cutoff)
                     .exclude(pk__in=names.incidents).exclude(run_id__in=named_runs))
        counts["incidents"] = delete_in_chunks(incidents, COLLECTED_CHUNK)
    if policy.review_retention_days:
        cutoff = now - timedelta(days=policy.review_retention_days)
        # A decided review has its decision in the log (PROTECT): only never-decided ones can go.
        reviews = (Review.objects.filter(run__project=project, state=ReviewState.OPEN, opened_at__lt=cutoff)
                   .exclude(pk__in=names.reviews).exclude(run_id__in=named_runs))
        counts["reviews"] = delete_in_chunks(reviews, COLLECTED_CHUNK)
    return counts


def _prune_blocks(project, cutoff, since) -> int:
    """Delete the blocks of the project's batches that arrived before `cutoff` (and at or after `since`, the last pass's cutoff)."""
    receipts = BatchReceipt.objects.filter(run__project=project, received_at__lt=cutoff)
    if since is not None:
        receipts = receipts.filter(received_at__gte=since)
    total, after = 0, 0
    while True:
        ids = list(receipts.filter(pk__gt=after).order_by("pk").values_list("pk", flat=True)[:RECEIPTS_AT_ONCE])
        if not ids:
            return total
        total += delete_in_chunks(Block.objects.filter(receipt_id__in=ids))
        after = ids[-1]
