"""Which phase is in effect at which step (contract: a phase holds until the next entry;
ties at one step go to the later time, then to the later arrival)."""
from dataclasses import dataclass

from ingest.models import Phase


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
