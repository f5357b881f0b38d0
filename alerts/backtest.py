"""Backtesting a rule: the live evaluator replayed over stored runs, writing nothing.

Each chosen run's stored batches are judged again in the order they arrived,
by the live engine's own code (alerts/evaluation.py `_judge` and `_Evaluator`),
with the rule's progress and open alerts kept in memory instead of in
RuleProgress and Alert rows. What comes out is the alerts the rule would have
fired (raw: mutes are the inbox's business, not the rule's), the pages they
would have cost, and a false-alarm rate predicted from the verdicts people gave
stored alerts that cover the same run, component and steps.

A replay may be given a Budget (seconds and points): it stops before the batch
that would exceed either, and the result's `cut` says where it stopped.
"""
import math
import time
from collections import defaultdict
from dataclasses import asdict, dataclass

from django.db.models import Q

from alerts import evaluation
from alerts.batches import Batches
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
        self.batches = Batches.of(receipt)
        self.receipt = receipt
        self.now = receipt.received_at
        self.faults, self.judged, self.extended, self.touched = {}, set(), set(), set()
        self.reference_cache, self.band_samples = {}, {}

    def preload_blocks(self, rules, budget=None):
        """The run's blocks of the series the rules select, per batch, read once (the live engine reads each batch's
        blocks of every series as it comes); batch_blocks hands each batch its own, in the live engine's order.

        With a budget, reading stops at the first batch past what is left of it (a 10 M-point run is not read
        into memory to judge 2 M points); the replay then stops at that batch and says so."""
        chosen = [s for s in Series.objects.filter(run=self.run) if any(self.selects(r, s) for r in rules)]
        self.blocks_by_receipt, self.unread = defaultdict(list), None
        blocks = Block.objects.filter(series__in=chosen).select_related("series").order_by("receipt_id", "attempt", "id")
        read, receipt_id = 0, None
        for block in blocks.iterator(chunk_size=500):
            if budget is not None and block.receipt_id != receipt_id and receipt_id is not None:
                # Checked between batches: the batch that crosses the budget is read whole, to be refused whole.
                if budget.spent(read):
                    self.unread = block.receipt_id  # the replay stops here: this batch was not read
                    break
            receipt_id = block.receipt_id
            read += block.count
            self.blocks_by_receipt[block.receipt_id].append(block)

    def batch_blocks(self):
        return self.blocks_by_receipt.get(self.receipt.pk, [])

    def batch_blocks_by_series(self, series_pks):
        return None  # only the series the rule selects were read (preload_blocks)

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


# The budget's clock (tests replace it to make a replay take "longer" without waiting).
clock = time.monotonic


@dataclass
class Judged:
    """How far a budgeted replay got on one run: the steps of the batches it judged."""

    run: str
    first_step: int | None = None
    last_step: int | None = None
    complete: bool = False

    def add(self, first, last):
        if first is not None:
            self.first_step = first if self.first_step is None else min(self.first_step, first)
        if last is not None:
            self.last_step = last if self.last_step is None else max(self.last_step, last)

    def words(self):
        if self.first_step is None:
            return f"run {self.run}: no steps judged"
        steps = f"run {self.run}: steps {self.first_step}–{self.last_step} judged"
        return steps if self.complete else f"{steps}, the rest not"


class Budget:
    """What one backtest may spend: seconds of replay and points judged (None: no limit)."""

    def __init__(self, *, max_seconds=None, max_points=None):
        self.max_seconds, self.max_points = max_seconds, max_points
        self.began = clock()
        self.points = 0
        self.cut_by = None  # "seconds" or "points", once a batch was refused
        self.runs: list[Judged] = []

    def elapsed(self) -> float:
        return clock() - self.began

    def spent(self, more_points=0) -> bool:
        """Whether nothing more than `more_points` is left: time is up, or those points use up the rest."""
        if self.max_seconds is not None and self.elapsed() >= self.max_seconds:
            return True
        return self.max_points is not None and self.points + more_points >= self.max_points

    def take(self, points) -> bool:
        """Judge a batch of `points`? False (and the reason kept) when time is up or it would exceed the points."""
        if self.max_seconds is not None and self.elapsed() >= self.max_seconds:
            self.cut_by = "seconds"
        elif self.max_points is not None and self.points + points > self.max_points:
            self.cut_by = "points"
        else:
            self.points += points
            return True
        return False

    def cut(self, run_ids):
        """What the result says about the budget: None when every batch of every run was judged."""
        if self.cut_by is None:
            return None
        judged = {j.run: j for j in self.runs}
        parts = [judged[r].words() if r in judged else f"run {r}: not judged" for r in run_ids]
        seconds = round(self.elapsed(), 1)
        limit = (f"{self.max_seconds} s" if self.cut_by == "seconds" else f"{self.max_points:,} points")
        return {
            "by": self.cut_by,
            "points": self.points,
            "seconds": seconds,
            "max_points": self.max_points,
            "max_seconds": self.max_seconds,
            "judged": [asdict(judged[r]) for r in run_ids if r in judged],
            "message": f"stopped after {self.points:,} points / {seconds} s (the limit is {limit}); " + "; ".join(parts),
        }


def _batch_extent(evaluator, receipt, point_rule):
    """(points, first step, last step) of what the batch gives the rule to judge."""
    if point_rule:
        blocks = evaluator.blocks_by_receipt.get(receipt.pk, [])
        if not blocks:
            return math.inf, None, None  # a batch the budget left unread
        return (sum(b.count for b in blocks), min(b.first_step for b in blocks), max(b.last_step for b in blocks))
    return receipt.points + receipt.events, receipt.min_step, receipt.max_step


def replay_run(rule, run, budget=None, *, reported=True):
    """The alerts `rule` would fire on `run`, and the fault that stopped the replay (None if none).

    With a budget, the replay stops before the first batch the budget refuses (`budget.cut_by` says why).
    `reported`: the steps judged go into the budget's `cut` message (the saved rule of a comparison spends the
    same budget, but the message is about the draft's figures)."""
    if not evaluation._run_selected(rule, run):
        return [], None
    evaluator = _ReplayEvaluator(run, [rule])
    receipts = BatchReceipt.objects.filter(run=run).order_by("id")
    point_rule = rule.kind in evaluation.POINT_KINDS
    if point_rule:
        try:
            evaluator.preload_blocks([rule], budget)
        except evaluation.RuleFailed as exc:
            return [], RunFault(run.run_id, None, f"{type(exc.__cause__).__name__}: {exc.__cause__}")
        # A batch without a block the rule selects changes nothing for a point rule: not replayed.
        replayed = list(evaluator.blocks_by_receipt) + ([evaluator.unread] if evaluator.unread else [])
        receipts = receipts.filter(pk__in=replayed)
    judged = Judged(run.run_id)
    if budget is not None and reported:
        budget.runs.append(judged)
    for receipt in receipts.iterator():
        if budget is not None:
            points, first, last = _batch_extent(evaluator, receipt, point_rule)
            if not budget.take(points):
                return evaluator.would_be, None
            judged.add(first, last)
        evaluator.start(receipt)
        try:
            evaluation._judge(receipt, run, [rule], {}, evaluator)
        except evaluation.RuleFailed as exc:
            # Live, the rule would be skipped for this batch with everything it did rolled back; a replay
            # cannot roll its memory back, so it stops here and says so.
            return evaluator.would_be, RunFault(run.run_id, receipt.pk, f"{type(exc.__cause__).__name__}: {exc.__cause__}")
    judged.complete = True
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


def _pages(rule, alerts) -> int:
    return len(alerts) if rule.permitted_response in PAGING_RESPONSES else 0


def backtest(rule, runs, budget=None, *, saved=None, on_run=None):
    """Replay `rule` (saved or not; never saved here) over `runs`; the result as the API and command show it.

    With a budget the replay stops where the budget runs out; `cut` then says how far it got (else null).
    `saved`: the saved rule a draft edits, replayed run by run after the draft over the same runs and budget
    (so a cut leaves both judged on the same runs); the result's `compared` says what the edit changes (else null).
    `on_run(n)` is called as each run is done (with both rules), n counting them: the job's progress."""
    runs = list(runs)
    alerts, faults = [], []
    saved_alerts, saved_faults, compared_runs = [], [], []
    for done, run in enumerate(runs, 1):
        would_be, fault = replay_run(rule, run, budget)
        alerts.extend(would_be)
        if fault:
            faults.append(asdict(fault))
        if budget is not None and budget.cut_by:
            break
        if saved is not None:
            # A fault of the saved rule is not the draft's: the comparison counts what it fired up to it, and says so.
            saved_would_be, saved_fault = replay_run(saved, run, budget, reported=False)
            if budget is not None and budget.cut_by:
                break  # the saved rule was not judged to the end of this run: the run is not compared
            saved_alerts.extend(saved_would_be)
            if saved_fault:
                saved_faults.append(asdict(saved_fault))
            compared_runs.append(run.run_id)
        if on_run is not None:
            on_run(done)
    limits = list(LIMITS)
    if rule.kind == RuleKind.ABSENCE:
        limits.insert(0, "this is an absence rule: the silent alerts it fires on wall time are not in this result")
    if saved is not None:
        limits.append("the saved rule is compared by replaying it, as it was stored when the backtest started, over "
                      "the same runs with the same code: not by the alerts it fired live")
    return {
        "rule": rule.pk,
        "runs": len(runs),
        "runs_with_alerts": len({a.run for a in alerts}),
        "alerts": len(alerts),
        "pages": _pages(rule, alerts),
        "false_alarms": predicted_false_alarms(alerts, {r.run_id: r for r in runs}),
        "would_fire": [a.as_dict() for a in alerts],
        "faults": faults,
        "limits": limits,
        "points": budget.points if budget is not None else None,
        "cut": budget.cut([r.run_id for r in runs]) if budget is not None else None,
        "compared": (compare(rule, alerts, saved, saved_alerts, saved_faults, compared_runs, len(runs))
                     if saved is not None else None),
    }


def _plural(n, word):
    return f"{n} {word}{'' if n == 1 else 's'}"


def _change(delta, word):
    """"2 fewer alerts", "1 more page"."""
    return f"{abs(delta)} {'more' if delta > 0 else 'fewer'} {word}{'' if abs(delta) == 1 else 's'}"


def compare(draft, draft_alerts, saved, saved_alerts, saved_faults, run_ids, runs) -> dict:
    """The draft's figures against the saved rule's on the runs both were judged on, and the runs that change.

    `run_ids`: the runs both rules were replayed over to the end, of `runs` asked (a cut stops short of them)."""
    compared = set(run_ids)
    draft_alerts = [a for a in draft_alerts if a.run in compared]
    per_run = {r: [0, 0] for r in run_ids}
    for a in draft_alerts:
        per_run[a.run][0] += 1
    for a in saved_alerts:
        per_run[a.run][1] += 1

    def figures(rule, alerts):
        return {"alerts": len(alerts), "runs_with_alerts": len({a.run for a in alerts}), "pages": _pages(rule, alerts)}

    mine, theirs = figures(draft, draft_alerts), figures(saved, saved_alerts)
    gaining = [{"run": r, "draft": d, "saved": s} for r, (d, s) in per_run.items() if d > s]
    losing = [{"run": r, "draft": d, "saved": s} for r, (d, s) in per_run.items() if d < s]

    def words(f):
        return (f"{_plural(f['alerts'], 'alert')} on {f['runs_with_alerts']} of {_plural(len(run_ids), 'run')}, "
                f"{_plural(f['pages'], 'page')}")

    changes = []
    delta = mine["alerts"] - theirs["alerts"]
    changes.append(_change(delta, "alert") if delta else "as many alerts")
    if mine["pages"] != theirs["pages"]:
        changes.append(_change(mine["pages"] - theirs["pages"], "page"))
    run_words = []
    for r, (d, s) in per_run.items():
        if d == s:
            continue
        if d == 0:
            run_words.append(f"run {r} no longer alerts")
        elif s == 0:
            run_words.append(f"run {r} newly alerts ({_plural(d, 'alert')})")
        else:
            run_words.append(f"run {r}: {_plural(d, 'alert')} instead of {s}")
    partial = f"On the {_plural(len(run_ids), 'run')} both were judged on (the budget ran out): " if len(run_ids) < runs else ""
    said = ", ".join(changes) + "; " + ("; ".join(run_words) if run_words else "the same number of alerts on every run")
    return {
        "rule": saved.pk,
        "name": saved.name,
        "runs": list(run_ids),
        "draft": mine,
        "saved": {**theirs, "would_fire": [a.as_dict() for a in saved_alerts], "faults": saved_faults},
        "change": {k: mine[k] - theirs[k] for k in mine},
        "runs_gaining": gaining,
        "runs_losing": losing,
        "complete": len(run_ids) == runs,
        "message": partial + f"Draft: {words(mine)} — saved rule: {words(theirs)} ({said})",
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
