"""Which phase is in effect at which step (contract: a phase holds until the next entry;
ties at one step go to the later time, then to the later arrival)."""
from dataclasses import dataclass

import numpy as np

from ingest.models import IdentityChange, Phase


@dataclass(frozen=True)
class PhaseSpan:
    start: int
    end: int | None  # last step of the span; None = still in effect
    phase: str
    kind: str


def phase_spans(run) -> list[PhaseSpan]:
    winners = {}
    for step, phase, kind in Phase.objects.filter(run=run).order_by("step", "time", "id").values_list("step", "phase", "kind"):
        winners[step] = (phase, kind)  # later (time, arrival) overwrites earlier at the same step
    steps = sorted(winners)
    spans = []
    for i, step in enumerate(steps):
        phase, kind = winners[step]
        end = steps[i + 1] - 1 if i + 1 < len(steps) else None
        spans.append(PhaseSpan(step, end, phase, kind))
    return spans


# After these the run's own history no longer describes it (new data, a new config); baselines start again.
RECONFIGURED = "reconfigured"
RESET_PHASES = {"data_refresh", RECONFIGURED}
# A change of what the run computes, announced by the job (a new `config`, `data_snapshot` or `code_rev` on its run
# line, stored as an IdentityChange at the step it arrived with): the new normal is declared, so baselines start
# again there, the way a data refresh starts them, and the first steps after it settle (phase kind `reconfigured`,
# which rules skip as they skip a data refresh; the change itself is on the run page with its old and new value).
ANNOUNCED_FIELDS = ("config", "data_snapshot", "code_rev")
RECONFIGURED_STEPS = 10


# A run that declares a step budget but never a warmup phase is taken to warm up for
# this share of its budget (the GPT-NeoX and Megatron default), so its first loss
# spikes at peak learning rate are judged as warmup, not as training.
IMPLICIT_WARMUP_SHARE = 0.01


class PhaseIndex:
    """Which phase span holds at each step, the kind its baseline continues, and the latest data refresh."""

    def __init__(self, run):
        self.spans = phase_spans(run)
        announced = IdentityChange.objects.filter(run=run, field__in=ANNOUNCED_FIELDS, step__isnull=False)
        self.announced = np.array(sorted(set(announced.values_list("step", flat=True))), dtype=np.int64)
        budget = (run.budget or {}).get("steps")
        self.implicit_warmup_end = -1
        if budget and not any(s.kind == "warmup" for s in self.spans):
            self.implicit_warmup_end = int(np.ceil(IMPLICIT_WARMUP_SHARE * budget))
        self.starts = np.array([s.start for s in self.spans], dtype=np.int64)
        baseline, reset = [], []
        last_kind, last_reset = "steady", -1
        for span in self.spans:
            if span.kind != "restart":
                last_kind = span.kind
            if span.kind in RESET_PHASES:
                last_reset = span.start
            # A restart continues whatever ran before it: judge it against that history.
            baseline.append(last_kind)
            reset.append(last_reset)
        self.baseline = np.array(baseline or ["steady"], dtype=object)
        self.reset = np.array(reset or [-1], dtype=np.int64)

    def at(self, step):
        index = int(np.searchsorted(self.starts, step, side="right")) - 1
        return self.spans[index] if index >= 0 else None

    def of(self, steps):
        """Per step: phase kind, baseline kind, span start, latest reset start (-1 = none)."""
        n = len(steps)
        if self.spans:
            index = np.searchsorted(self.starts, steps, side="right") - 1
            before = index < 0
            safe = np.maximum(index, 0)
            kinds = np.array([s.kind for s in self.spans], dtype=object)[safe]
            kinds[before] = "steady"
            baseline = self.baseline[safe]
            baseline[before] = "steady"
            span_start = np.where(before, -1, self.starts[safe])
            reset = np.where(before, -1, self.reset[safe])
        else:
            kinds, baseline = np.full(n, "steady", dtype=object), np.full(n, "steady", dtype=object)
            span_start = reset = np.full(n, -1, dtype=np.int64)
        if self.implicit_warmup_end > 0:
            warming = steps < self.implicit_warmup_end
            kinds[warming] = baseline[warming] = "warmup"
            span_start = np.where(warming, 0, np.maximum(span_start, self.implicit_warmup_end))
        if len(self.announced):
            # The latest announced change at or before each step: baselines start again there, and its first
            # RECONFIGURED_STEPS settle (whatever phase the job declared at that step).
            index = np.searchsorted(self.announced, steps, side="right") - 1
            changed = index >= 0
            at = np.where(changed, self.announced[np.maximum(index, 0)], -1)
            reset = np.where(changed, np.maximum(reset, at), reset)
            span_start = np.where(changed, np.maximum(span_start, at), span_start)
            settling = changed & (steps - at < RECONFIGURED_STEPS)
            kinds = np.where(settling, RECONFIGURED, kinds).astype(object)
        return kinds, baseline, span_start, reset
