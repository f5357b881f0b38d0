"""Rules that could not be judged: a RuleFault row per failed batch, one when the rule judges cleanly again.

Evaluation (alerts/evaluation.py) records here after it has judged a batch
without the failing rules; the rules pages and the API read a rule's health
(`with_health`, `health`): broken while its latest row is a failure, recovered
once a recovery follows it, ok with no failures at all. Every row stays.
"""
from django.db.models import Count, IntegerField, OuterRef, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from alerts.models import Rule, RuleFault, RuleFaultKind

MAX_ERROR_CHARS = 2000


def error_text(exc) -> str:
    """'ValueError: …', bounded: what the rules pages show (the traceback goes to the log)."""
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= MAX_ERROR_CHARS else text[:MAX_ERROR_CHARS - 1] + "…"


def invalid_text(errors: dict[str, str]) -> str:
    text = "invalid settings: " + "; ".join(f"{path}: {message}" for path, message in errors.items())
    return text if len(text) <= MAX_ERROR_CHARS else text[:MAX_ERROR_CHARS - 1] + "…"


def _latest(kind, field="id"):
    return Subquery(
        RuleFault.objects.filter(rule=OuterRef("pk"), kind=kind).order_by("-id").values(field)[:1]
    )


def with_last_fault(rules):
    """Rules with the ids of their latest failure and recovery (what evaluation needs to see one recover)."""
    return rules.annotate(last_failure_id=_latest(RuleFaultKind.FAILED), last_recovery_id=_latest(RuleFaultKind.RECOVERED))


def with_health(rules):
    """Rules annotated with what `health` reads: the failure count, the last error and when, the last recovery."""
    count = (RuleFault.objects.filter(rule=OuterRef("pk"), kind=RuleFaultKind.FAILED).order_by()
             .values("rule").annotate(n=Count("pk")).values("n"))
    return with_last_fault(rules).annotate(
        failure_count=Coalesce(Subquery(count, output_field=IntegerField()), Value(0)),
        last_error=_latest(RuleFaultKind.FAILED, "error"),
        last_failed_at=_latest(RuleFaultKind.FAILED, "at"),
        recovered_at=_latest(RuleFaultKind.RECOVERED, "at"),
    )


def _broken(rule) -> bool:
    return rule.last_failure_id is not None and (rule.last_recovery_id or 0) < rule.last_failure_id


def health(rule) -> dict:
    """{"state": "ok" | "broken" | "recovered", "failures", "last_error", "last_failed_at", "recovered_at"}."""
    if not hasattr(rule, "failure_count"):
        rule = with_health(Rule.objects.filter(pk=rule.pk)).get()
    if rule.last_failure_id is None:
        state = "ok"
    else:
        state = "broken" if _broken(rule) else "recovered"
    return {
        "state": state,
        "failures": rule.failure_count,
        "last_error": rule.last_error,
        "last_failed_at": rule.last_failed_at,
        "recovered_at": rule.recovered_at,
    }


def recent(rule, limit=20):
    return list(RuleFault.objects.filter(rule=rule).select_related("run").order_by("-id")[:limit])


def record_failures(receipt, run, errors: dict) -> None:
    """A row per rule that was not judged on this batch ({rule: error text})."""
    if errors:
        now = timezone.now()
        RuleFault.objects.bulk_create([
            RuleFault(rule=rule, kind=RuleFaultKind.FAILED, receipt=receipt, run=run, error=error, at=now)
            for rule, error in errors.items()
        ])


def record_recoveries(receipt, run, rules) -> None:
    """A `recovered` row for each rule (loaded by with_last_fault) that failed before and has now judged cleanly."""
    for rule in rules:
        if not _broken(rule):
            continue
        # Under a lock on the rule's row, and checked again, so concurrent batches record one recovery.
        # NO KEY UPDATE: evaluations inserting alerts for the rule (a key-share lock each) are not blocked.
        Rule.objects.select_for_update(no_key=True).filter(pk=rule.pk).values_list("pk", flat=True).first()
        latest = RuleFault.objects.filter(rule=rule).order_by("-id").values_list("kind", flat=True).first()
        if latest == RuleFaultKind.FAILED:
            RuleFault.objects.create(rule=rule, kind=RuleFaultKind.RECOVERED, receipt=receipt, run=run, at=timezone.now())
