"""Backtesting a rule: the live evaluator replayed over stored runs, writing nothing.

Each chosen run's stored batches are judged again in the order they arrived,
by the live engine's own code (alerts/evaluation.py `_judge` and `_Evaluator`),
with the rule's progress and open alerts kept in memory instead of in
RuleProgress and Alert rows. What comes out is the alerts the rule would have
fired (raw: mutes are the inbox's business, not the rule's), the pages they
would have cost, and a false-alarm rate predicted from the verdicts people gave
stored alerts that cover the same run, component and steps.
"""
import math
from collections import defaultdict
from dataclasses import asdict, dataclass

from django.db.models import Q

from alerts import evaluation
from alerts.fatigue import PAGING_RESPONSES
from alerts.models import Alert, AlertState, RuleKind, Verdict
from ingest.models import BatchReceipt, Block, Series

MAX_RUNS = 200

# What a replay cannot reproduce, said rather than guessed; every result carries these.
LIMITS = [
    "wall-clock absence is not replayed: the periodic sweep judges a run that stopped sending against the clock "
    "(silent alerts), and a backtest has no clock to replay; absence rules are judged on the stored steps and "
    "point times only",
    "mutes are ignored: these are the raw alerts the rule would fire, muted or not",
    "the rule is judged with its settings as given, not with the revisions that were live when each batch arrived",
    "what a batch is judged against is read as stored now: phases, reference runs, the training metric of a "
    "divergence rule, the update ratios of a weight-jump rule and the neighbouring steps of an absence rule; a run "
    "whose batches arrived out of step order, or a reference run marked later, can differ from what fired live",
    "event rules: an Alertmanager event's end is its stored end, so an alert can resolve earlier than it did live",
    "batches are replayed in the order they were received; live, parallel workers may have judged them in another",
]


@dataclass
class WouldBe:
    """One alert the rule would fire (the fields of an Alert a backtest can know)."""

    pk: int
    run: str
    component: str
    metric: str
    condition: str
    first_step: int
    fired_step: int
    last_step: int
    magnitude: float | None
    unit: str
    phase: str
    resolved_step: int | None = None
    state: str = AlertState.FIRING

    def as_dict(self):
        data = asdict(self)
        del data["pk"], data["state"]
        data["resolved"] = self.state == AlertState.RESOLVED
        return data


class _ReplayEvaluator(evaluation._Evaluator):
    """The live evaluator with its reads of stored state and its writes replaced by memory, for one run."""

    def __init__(self, run, rules):
        self.would_be = []
        super().__init__(None, run, rules)

    def start(self, receipt):
        """A new batch: what the live engine keeps per batch starts again; progress and open alerts carry on."""
        self.receipt = receipt
        self.now = receipt.received_at
        self.faults, self.judged, self.extended, self.touched = {}, set(), set(), set()
        self.reference_cache, self.band_samples = {}, {}

    def preload_blocks(self, rules):
        """The run's blocks of the series the rules select, per batch, read once (the live engine reads each batch's
        blocks of every series as it comes); batch_blocks hands each batch its own, in the live engine's order."""
        chosen = [s for s in Series.objects.filter(run=self.run) if any(self.selects(r, s) for r in rules)]
        self.blocks_by_receipt = defaultdict(list)
        blocks = Block.objects.filter(series__in=chosen).select_related("series").order_by("receipt_id", "attempt", "id")
        for block in blocks.iterator(chunk_size=500):
            self.blocks_by_receipt[block.receipt_id].append(block)

    def batch_blocks(self):
        return self.blocks_by_receipt.get(self.receipt.pk, [])

    def stored_progress(self, rules):
        return {}

    def stored_open_alerts(self, rules):
        return {}

    def save_progress(self):
        pass

    def sample_band(self, rule, series, steps, band):
        pass  # the band a chart draws: nothing for a backtest to keep

    def save_band_samples(self):
        pass

    def create_alert(self, *, rule, run, fired_at, magnitude_unit, **fields):
        alert = WouldBe(pk=len(self.would_be) + 1, run=run.run_id, unit=magnitude_unit, **fields)
        self.would_be.append(alert)
        return alert

    def update_alert(self, alert, updates, step):
        pass  # fire_or_extend has changed the alert in memory already

    def close_alert(self, alert, step):
        alert.state, alert.resolved_step = AlertState.RESOLVED, step


@dataclass
class RunFault:
    run: str
    batch: int | None  # None: the rule failed before any batch (selecting the run's series)
    error: str


def replay_run(rule, run):
    """The alerts `rule` would fire on `run`, and the fault that stopped the replay (None if none)."""
    if not evaluation._run_selected(rule, run):
        return [], None
    evaluator = _ReplayEvaluator(run, [rule])
    receipts = BatchReceipt.objects.filter(run=run).order_by("id")
    if rule.kind in evaluation.POINT_KINDS:
        try:
            evaluator.preload_blocks([rule])
        except evaluation.RuleFailed as exc:
            return [], RunFault(run.run_id, None, f"{type(exc.__cause__).__name__}: {exc.__cause__}")
        # A batch without a block the rule selects changes nothing for a point rule: not replayed.
        receipts = receipts.filter(pk__in=list(evaluator.blocks_by_receipt))
    for receipt in receipts.iterator():
        evaluator.start(receipt)
        try:
            evaluation._judge(receipt, run, [rule], {}, evaluator)
        except evaluation.RuleFailed as exc:
            # Live, the rule would be skipped for this batch with everything it did rolled back; a replay
            # cannot roll its memory back, so it stops here and says so.
            return evaluator.would_be, RunFault(run.run_id, receipt.pk, f"{type(exc.__cause__).__name__}: {exc.__cause__}")
    return evaluator.would_be, None


Z95 = 1.959963984540054  # the two-sided 95% normal quantile


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval of a proportion (95% by default); None when there is nothing to rest on.

    One formula for the backtest's predicted false alarms and the audit report's false-alarm rate."""
    if n == 0:
        return None
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return (max(0.0, centre - half), min(1.0, centre + half))


def predicted_false_alarms(would_be, runs_by_id):
    """The false-alarm rate of the verdicts on stored alerts (any rule) that overlap a would-be alert.

    Overlap: the same run and component, step windows [first, last] that meet. Each stored alert counts once.
    """
    judged = {}
    for wb in would_be:
        overlapping = Alert.objects.filter(
            run=runs_by_id[wb.run], component=wb.component, first_step__lte=wb.last_step, last_step__gte=wb.first_step,
            verdict__in=[Verdict.FALSE_ALARM, Verdict.ACTIONABLE],
        )
        judged.update(overlapping.values_list("pk", "verdict"))
    false = sum(1 for v in judged.values() if v == Verdict.FALSE_ALARM)
    n = len(judged)
    interval = wilson(false, n)
    return {
        "verdicts": n,
        "false_alarm": false,
        "actionable": n - false,
        "rate": false / n if n else None,
        "interval": list(interval) if interval else None,
        "prediction": f"{false}/{n} overlapping verdicts false" if n else "no prediction",
    }


def backtest(rule, runs):
    """Replay `rule` (saved or not; never saved here) over `runs`; the result as the API and command show it."""
    runs = list(runs)
    alerts, faults = [], []
    for run in runs:
        would_be, fault = replay_run(rule, run)
        alerts.extend(would_be)
        if fault:
            faults.append(asdict(fault))
    pages = len(alerts) if rule.permitted_response in PAGING_RESPONSES else 0
    limits = list(LIMITS)
    if rule.kind == RuleKind.ABSENCE:
        limits.insert(0, "this is an absence rule: the silent alerts it fires on wall time are not in this result")
    return {
        "rule": rule.pk,
        "runs": len(runs),
        "runs_with_alerts": len({a.run for a in alerts}),
        "alerts": len(alerts),
        "pages": pages,
        "false_alarms": predicted_false_alarms(alerts, {r.run_id: r for r in runs}),
        "would_fire": [a.as_dict() for a in alerts],
        "faults": faults,
        "limits": limits,
    }


class BadSelection(ValueError):
    """Runs that cannot be replayed as asked: `field` names what to change."""

    def __init__(self, field, message):
        super().__init__(message)
        self.field = field


def chosen_runs(project, *, run_ids=None, tags=None, since=None, until=None):
    """select_runs, refusing run ids the project does not have and more runs than MAX_RUNS (BadSelection)."""
    if run_ids:
        known = set(project.runs.filter(run_id__in=run_ids).values_list("run_id", flat=True))
        unknown = sorted(set(run_ids) - known)
        if unknown:
            raise BadSelection("runs", f"no run {', '.join(unknown)} in project {project.slug}")
    runs = select_runs(project, run_ids=run_ids, tags=tags, since=since, until=until)
    if len(runs) > MAX_RUNS:
        raise BadSelection("runs", f"{len(runs)} runs match; a backtest replays at most {MAX_RUNS}: narrow it "
                                   "(runs, tags, since, until)")
    return runs


def select_runs(project, *, run_ids=None, tags=None, since=None, until=None):
    """The project's runs to replay: the named ones, or those with these tags seen in [since, until]."""
    runs = project.runs.all()
    if run_ids:
        runs = runs.filter(run_id__in=run_ids)
    # A run is in the period when its life (created .. last seen) meets it.
    if since is not None:
        runs = runs.filter(Q(last_seen_at__gte=since) | Q(last_seen_at__isnull=True, created_at__gte=since))
    if until is not None:
        runs = runs.filter(created_at__lte=until)
    wanted = tags or {}
    # Tags compared in Python, as the rules' own run scope compares them (any key, any JSON value).
    return [r for r in runs.order_by("created_at", "id") if all((r.tags or {}).get(k) == v for k, v in wanted.items())]
