"""The steps each series has sent in this process, so that none is sent twice.

The console takes a step that a series re-sends for a restart (a new attempt with a rewind), so a
repeat inside one process (a framework logging `epoch` again with its eval logs, a loop logging a
step twice) must not leave the client. A restart declared by the job (`wl.restart(step)`, or a
`restart` phase) forgets everything: the new attempt holds nothing yet.

Kept per series as runs of arithmetic progressions, so a series logged every step or every k steps
costs one run however long the job; a new step below the highest one (a late evaluation) is kept in a
small set beside them. Memory is bounded: past MAX_RUNS runs (or MAX_LATE late steps) the oldest half
is forgotten and every step at or below what was forgotten counts as sent.
"""
from __future__ import annotations

from bisect import bisect_right

MAX_RUNS = 4096
MAX_LATE = 4096


class SeriesSteps:
    __slots__ = ("starts", "runs", "late", "floor")

    def __init__(self):
        self.starts = []  # first step of each run, increasing
        self.runs = []  # [start, stride (0: one step so far), last]; disjoint and increasing
        self.late = set()
        self.floor = -1  # every step <= floor counts as sent (forgotten history)

    def add(self, step: int) -> bool:
        """Record `step`; False if this series has sent it already."""
        runs = self.runs
        if runs:
            run = runs[-1]
            last = run[2]
            if step > last:
                if run[1] == 0:
                    run[1], run[2] = step - run[0], step
                elif step - last == run[1]:
                    run[2] = step
                else:
                    self._new_run(step)
                return True
            if step == last or step <= self.floor or step in self.late:
                return False
            i = bisect_right(self.starts, step) - 1
            if i >= 0:
                start, stride, last = runs[i]
                if step <= last and (step == start if stride == 0 else (step - start) % stride == 0):
                    return False
            self.late.add(step)
            if len(self.late) > MAX_LATE:
                self._forget(sorted(self.late)[MAX_LATE // 2])
            return True
        if step <= self.floor:
            return False
        self._new_run(step)
        return True

    def _new_run(self, step):
        self.runs.append([step, 0, step])
        self.starts.append(step)
        if len(self.runs) > MAX_RUNS:
            self._forget(self.runs[MAX_RUNS // 2 - 1][2])

    def _forget(self, upto):
        """Forget the history up to `upto`, which from now on all counts as sent."""
        self.floor = max(self.floor, upto)
        keep = next((i for i, run in enumerate(self.runs) if run[2] > self.floor), len(self.runs) - 1)
        del self.runs[:keep], self.starts[:keep]
        self.late = {s for s in self.late if s > self.floor}


class SentSteps:
    """Every series' SeriesSteps, by (metric, component), and the value each sent at its highest step."""

    def __init__(self):
        self.series = {}
        self.last_value = {}

    def add(self, metric, component, step: int, token: str):
        """None: a new step, to send. Else a repeat, not to send: True when it repeats the value the
        series sent at its highest step, False otherwise (another value, or an earlier step)."""
        key = (metric, component)
        steps = self.series.get(key)
        if steps is None:
            steps = self.series[key] = SeriesSteps()
        if steps.add(step):
            if step == steps.runs[-1][2]:
                self.last_value[key] = token
            return None
        return step == steps.runs[-1][2] and self.last_value.get(key) == token

    def restart(self):
        self.series.clear()
        self.last_value.clear()
