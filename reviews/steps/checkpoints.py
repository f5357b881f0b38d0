"""A run's checkpoints on the history as it stands, and the rewind proposal for an incident.

Step 2 (hard invariants) judges checkpoint integrity from them; the decision (step 6) proposes the rewind.
"""
from __future__ import annotations

from ingest.models import Phase

# rewind_proposal: PaLM restarted ~100 steps before a spike's onset.
REWIND_MARGIN = 100


def checkpoint_steps(run, attempts=None) -> list[int]:
    """Steps of the run's checkpoint phases on the history as it stands (sorted).

    A checkpoint written by an attempt at a step a later attempt went back over belongs to a
    history that was thrown away: it is left out.
    """
    attempts = attempts if attempts is not None else list(run.attempts.order_by("number"))
    starts = {a.number: a.start_step for a in attempts}
    kept = set()
    for step, attempt in Phase.objects.filter(run=run, kind="checkpoint").values_list("step", "attempt"):
        later = [s for n, s in starts.items() if n > attempt and s is not None]
        if all(step < s for s in later):
            kept.add(step)
    return sorted(kept)


def last_checkpoint_step(run) -> int | None:
    """The step of the run's latest checkpoint phase (on the history as it stands)."""
    steps = checkpoint_steps(run)
    return steps[-1] if steps else None


def rewind_proposal(run, onset_step: int, alert_step: int | None = None, *, margin: int = REWIND_MARGIN) -> dict | None:
    """The rewind for an incident (the PaLM practice): the latest checkpoint at least `margin` steps before the onset.

    Returns None when no checkpoint qualifies. Otherwise:
      checkpoint_step: the checkpoint to restart from;
      newest_step: the run's newest step; steps_redone: newest_step - checkpoint_step;
      alert_checkpoint_step: the last checkpoint at or before the alert (alert_step, default the onset), or None;
      alert_checkpoint_steps_redone: what rewinding there would redo;
      fewer_steps_than_alert_checkpoint: alert_checkpoint_steps_redone - steps_redone (negative: the proposal
        redoes that many more steps, the price of restarting before the onset rather than inside it);
      alert_checkpoint_after_onset: whether that checkpoint was written after the onset (it holds the fault);
      skip_batches: {"from_step", "to_step", "count"}: the batches the job consumed from the checkpoint up to
        the alert, i.e. before and during the onset (PaLM skipped the ~200-500 batches seen before and during
        a spike); the job should skip the data of these steps when it replays them.
    """
    checkpoints = checkpoint_steps(run)
    newest = run.attempt_max_step if run.attempt_max_step is not None else run.max_step
    alert_step = onset_step if alert_step is None else alert_step
    qualifying = [s for s in checkpoints if s <= onset_step - margin]
    if not qualifying or newest is None:
        return None
    chosen = qualifying[-1]
    before_alert = [s for s in checkpoints if s <= alert_step]
    naive = before_alert[-1] if before_alert else None
    redone = newest - chosen
    naive_redone = newest - naive if naive is not None else None
    skip_to = max(onset_step, alert_step)
    return {
        "checkpoint_step": chosen,
        "onset_step": onset_step,
        "alert_step": alert_step,
        "margin": margin,
        "newest_step": newest,
        "steps_redone": redone,
        "alert_checkpoint_step": naive,
        "alert_checkpoint_steps_redone": naive_redone,
        "fewer_steps_than_alert_checkpoint": None if naive_redone is None else naive_redone - redone,
        "alert_checkpoint_after_onset": None if naive is None else naive >= onset_step,
        "skip_batches": {"from_step": chosen + 1, "to_step": skip_to, "count": max(0, skip_to - chosen)},
    }
