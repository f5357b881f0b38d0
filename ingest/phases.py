"""Which phase is in effect at which step (contract: a phase holds until the next entry;
ties at one step go to the later time, then to the later arrival).

Every phase declared at a step holds at that step, though: an eval and a checkpoint at the same step (the
Trainer's default when eval_steps == save_steps) both happened there, so the tie's loser is kept as a span of
that one step and only the winner carries on to the next entry."""
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
    """In step order; at a step with several phases, the ones that hold only there first, the winner last."""
    at_step = {}
    for step, phase, kind in Phase.objects.filter(run=run).order_by("step", "time", "id").values_list("step", "phase", "kind"):
        entries = at_step.setdefault(step, {})
        entries.pop(phase, None)  # the same phase sent twice at a step is one span, placed by its later entry
        entries[phase] = kind
    steps = sorted(at_step)
    spans = []
    for i, step in enumerate(steps):
        *losers, (phase, kind) = at_step[step].items()
        spans.extend(PhaseSpan(step, step, p, k) for p, k in losers)
        end = steps[i + 1] - 1 if i + 1 < len(steps) else None
        spans.append(PhaseSpan(step, end, phase, kind))
    return spans


class Kinds(frozenset):
    """The phase kinds of a step where more than one phase holds: a rule scoped to any of them judges the step,
    and one that skips any of them skips it (a checkpoint's pause stays skipped whatever else ran there)."""

    @property
    def baseline(self) -> str:
        # Such steps form a baseline of their own: an eval step that also saved a checkpoint is neither.
        return "+".join(sorted(self))


def kind_in(kind, kinds) -> bool:
    """Whether a step's kind (a word, or Kinds where phases overlap) is, or includes, one of `kinds`."""
    return not kinds.isdisjoint(kind) if isinstance(kind, Kinds) else kind in kinds


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
        self.answered = {}  # of(): step array -> its answer
        self.spans = phase_spans(run)
        announced = IdentityChange.objects.filter(run=run, field__in=ANNOUNCED_FIELDS, step__isnull=False)
        self.announced = np.array(sorted(set(announced.values_list("step", flat=True))), dtype=np.int64)
        budget = (run.budget or {}).get("steps")
        self.implicit_warmup_end = -1
        if budget and not any(s.kind == "warmup" for s in self.spans):
            self.implicit_warmup_end = int(np.ceil(IMPLICIT_WARMUP_SHARE * budget))
        # Winners only (the last span at each start): a step's span is the one that carries on from it.
        winners = [s for i, s in enumerate(self.spans) if i + 1 == len(self.spans) or self.spans[i + 1].start != s.start]
        self.winners = winners
        self.starts = np.array([s.start for s in winners], dtype=np.int64)
        at_start = {}
        for span in self.spans:
            at_start.setdefault(span.start, []).append(span)
        self.overlaps = {step: Kinds(s.kind for s in spans) for step, spans in at_start.items() if len({s.kind for s in spans}) > 1}
        self.at_start = at_start
        baseline, reset = [], []
        last_kind, last_reset = "steady", -1
        for span in winners:
            if span.kind != "restart":
                last_kind = span.kind
            if any(s.kind in RESET_PHASES for s in at_start[span.start]):
                last_reset = span.start
            # A restart continues whatever ran before it: judge it against that history.
            baseline.append(last_kind)
            reset.append(last_reset)
        self.baseline = np.array(baseline or ["steady"], dtype=object)
        self.reset = np.array(reset or [-1], dtype=np.int64)
        self.overlap_steps = np.array(sorted(self.overlaps), dtype=np.int64)

    def at(self, step, prefer=None):
        """The phase in effect at `step`; where several hold there, one of `prefer` (a rule's scoped phases) first."""
        index = int(np.searchsorted(self.starts, step, side="right")) - 1
        if index < 0:
            return None
        span = self.winners[index]
        if prefer and span.start == step and span.kind not in prefer:
            return next((s for s in self.at_start[step] if s.kind in prefer), span)
        return span

    # A batch's series mostly share their steps, and evaluation asks for each series: the answers for the last
    # OF_KEPT step arrays are kept, read-only.
    OF_KEPT = 64

    def of(self, steps):
        """Per step: phase kind, baseline kind, span start, latest reset start (-1 = none); read-only arrays."""
        steps = np.asarray(steps)
        key = (steps.dtype.str, steps.tobytes())
        known = self.answered
        if key not in known:
            if len(known) >= self.OF_KEPT:
                known.clear()
            answer = self._of_steps(steps)
            for array in answer:
                array.flags.writeable = False
            known[key] = answer
        return known[key]

    def _of_steps(self, steps):
        n = len(steps)
        if self.spans:
            index = np.searchsorted(self.starts, steps, side="right") - 1
            before = index < 0
            safe = np.maximum(index, 0)
            kinds = np.array([s.kind for s in self.winners], dtype=object)[safe]
            kinds[before] = "steady"
            baseline = self.baseline[safe]
            baseline[before] = "steady"
            span_start = np.where(before, -1, self.starts[safe])
            reset = np.where(before, -1, self.reset[safe])
        else:
            kinds, baseline = np.full(n, "steady", dtype=object), np.full(n, "steady", dtype=object)
            span_start = reset = np.full(n, -1, dtype=np.int64)
        if len(self.overlap_steps):
            overlapped = np.flatnonzero(np.isin(steps, self.overlap_steps))
            for i in overlapped.tolist():
                both = self.overlaps[int(steps[i])]
                kinds[i] = both
                if "restart" not in both:
                    baseline[i] = both.baseline
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
