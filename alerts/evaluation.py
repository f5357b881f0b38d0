"""Rules against one stored batch: persistence, one open alert per (rule, run, component), a row per change.

Runs inside the evaluation task's transaction, which also marks the batch
evaluated, so a batch's points are judged exactly once even if a worker dies.
Kinds evaluated so far: nonfinite, threshold, event.
"""
from fnmatch import fnmatchcase

import numpy as np
from django.utils import timezone

from alerts.models import Alert, AlertChange, AlertState, ChangeKind, Rule, RuleKind, RuleProgress
from ingest.models import Block, Event
from ingest.phases import phase_spans
from ingest.storage import unpack

# Threshold rules stay quiet in these phases unless their scope names phases itself.
DEFAULT_SKIPPED_PHASES = {"warmup", "eval", "checkpoint", "restart", "data_refresh"}
POINT_KINDS = (RuleKind.NONFINITE, RuleKind.THRESHOLD)


def _run_selected(rule, run) -> bool:
    wanted = rule.scope.get("runs") or {}
    return all((run.tags or {}).get(k) == v for k, v in wanted.items())


def _series_selected(rule, metric, component, layer) -> bool:
    metrics = rule.scope.get("metrics") or []
    if not any(fnmatchcase(metric, pattern) for pattern in metrics):
        return False
    if not fnmatchcase(component, rule.scope.get("component", "*")):
        return False
    return rule.scope.get("layer") in (None, layer)


class _PhaseLookup:
    def __init__(self, run):
        self.spans = phase_spans(run)
        self.starts = [s.start for s in self.spans]

    def at(self, step):
        index = int(np.searchsorted(self.starts, step, side="right")) - 1
        return self.spans[index] if index >= 0 else None


def _held(rule, value, phase):
    """(condition holds, magnitude, unit) for one point."""
    if rule.kind == RuleKind.NONFINITE:
        return (not np.isfinite(value)), None, "non-finite points in a row"
    kind = phase.kind if phase else "steady"
    phases = rule.scope.get("phases")
    if (kind not in phases) if phases else (kind in DEFAULT_SKIPPED_PHASES):
        return False, None, ""
    above, below = rule.params.get("above"), rule.params.get("below")
    if above is not None and value > above:
        return True, float(value - above), f"above {above}"
    if below is not None and value < below:
        return True, float(below - value), f"below {below}"
    return False, None, ""


class _Evaluator:
    def __init__(self, receipt, run):
        self.receipt = receipt
        self.run = run
        self.now = timezone.now()
        self.phases = _PhaseLookup(run)
        self.extended = set()  # alerts already given an "extended" row for this batch

    def progress(self, rule, component, metric):
        return RuleProgress.objects.get_or_create(rule=rule, run=self.run, component=component, metric=metric)[0]

    def persisted(self, rule, progress, step, when) -> bool:
        need = rule.persistence
        if "points" in need:
            return progress.held_points >= need["points"]
        if "steps" in need:
            return step - progress.held_since_step + 1 >= need["steps"]
        return when - progress.held_since_time >= need["seconds"]

    def fire_or_extend(self, rule, component, metric, condition, first_step, step, magnitude, unit):
        alert = Alert.objects.filter(rule=rule, run=self.run, component=component).exclude(state=AlertState.RESOLVED).first()
        if alert is None:
            phase = self.phases.at(first_step)
            alert = Alert.objects.create(
                rule=rule, run=self.run, component=component, metric=metric, condition=condition,
                first_step=first_step, last_step=step, magnitude=magnitude, magnitude_unit=unit,
                phase=phase.phase if phase else "", fired_at=self.now,
            )
            AlertChange.objects.create(alert=alert, kind=ChangeKind.FIRED, step=first_step, at=self.now, receipt=self.receipt)
            self.extended.add(alert.pk)
            return
        updates = {"last_step": max(alert.last_step, step)}
        if magnitude is not None and (alert.magnitude is None or magnitude > alert.magnitude):
            updates["magnitude"] = magnitude
        Alert.objects.filter(pk=alert.pk).update(**updates)
        if alert.pk not in self.extended:
            AlertChange.objects.create(alert=alert, kind=ChangeKind.EXTENDED, step=step, at=self.now, receipt=self.receipt)
            self.extended.add(alert.pk)

    def resolve(self, rule, component, step):
        for alert in Alert.objects.filter(rule=rule, run=self.run, component=component).exclude(state=AlertState.RESOLVED):
            Alert.objects.filter(pk=alert.pk).update(state=AlertState.RESOLVED, resolved_at=self.now)
            AlertChange.objects.create(alert=alert, kind=ChangeKind.RESOLVED, step=step, at=self.now, receipt=self.receipt)

    def points(self, rules):
        blocks = Block.objects.filter(receipt=self.receipt).select_related("series").order_by("first_step")
        for block in blocks:
            series = block.series
            steps, values, times = unpack(block.data)
            if times is None:
                times = np.full(len(steps), self.receipt.received_at.timestamp())
            for rule in rules:
                if not _series_selected(rule, series.metric, series.component, series.layer):
                    continue
                self.judge_series(rule, series, steps, values, times)

    def judge_series(self, rule, series, steps, values, times):
        progress = self.progress(rule, series.component, series.metric)
        resolve_after = rule.persistence.get("resolve_points", 1)
        for step, value, when in zip(steps.tolist(), values.tolist(), times.tolist()):
            held, magnitude, unit = _held(rule, value, self.phases.at(step))
            if held:
                if progress.held_points == 0:
                    progress.held_since_step, progress.held_since_time = step, when
                progress.held_points += 1
                progress.clear_points = 0
                if self.persisted(rule, progress, step, when):
                    if rule.kind == RuleKind.NONFINITE:
                        magnitude = float(progress.held_points)
                    self.fire_or_extend(rule, series.component, series.metric, "", progress.held_since_step, step, magnitude, unit)
            else:
                progress.held_points = 0
                progress.clear_points += 1
                if progress.clear_points >= resolve_after:
                    self.resolve(rule, series.component, step)
        progress.save()

    def events(self, rules):
        for event in Event.objects.filter(receipt=self.receipt).order_by("step", "id"):
            for rule in rules:
                conditions = rule.scope.get("conditions") or []
                if event.condition not in conditions or not fnmatchcase(event.component, rule.scope.get("component", "*")):
                    continue
                magnitude = np.nan if event.magnitude is None else event.magnitude
                if not magnitude >= rule.params.get("min_magnitude", -np.inf):
                    continue
                self.fire_or_extend(rule, event.component, "", event.condition, event.step, event.step,
                                    float(magnitude) if np.isfinite(magnitude) else None, "event magnitude")


def evaluate_rules(receipt, run) -> bool:
    """Judge the batch against the project's enabled rules; True when the run has an open alert after it."""
    rules = [r for r in Rule.objects.filter(project_id=run.project_id, enabled=True) if _run_selected(r, run)]
    evaluator = _Evaluator(receipt, run)
    point_rules = [r for r in rules if r.kind in POINT_KINDS]
    if point_rules:
        evaluator.points(point_rules)
    event_rules = [r for r in rules if r.kind == RuleKind.EVENT]
    if event_rules:
        evaluator.events(event_rules)
    return Alert.objects.filter(run=run).exclude(state=AlertState.RESOLVED).exists()
