"""Within one process the client never sends a series' step twice: the console takes a re-sent step for a
restart, so a repeat (a framework logging `epoch` again with its eval logs, a loop logging a step twice) is
dropped and counted, and a job that really goes back to a checkpoint in the same process says so with
`wl.restart(step)`, which the console records as one new attempt with its rewind."""
import logging

from tests.client.support import read_json, read_points

import warninglight  # noqa: E402  (tests.client.support puts client/ on the path)

FAST = {"flush_seconds": 0.05, "backoff": 0.05, "code_rev": False}


def test_a_step_logged_again_is_sent_once_and_counted(console_server, token, tmp_path, caplog):
    with warninglight.watch(run_id="repeats", url=console_server.url, token=token, spool_dir=tmp_path, **FAST) as wl:
        for step in range(1, 41):
            wl.log(step, loss=1.0 / step, epoch=step / 40)
            if step % 10 == 0:  # an evaluation logs the epoch again at the same step, as the HF Trainer does
                wl.log(step, val_loss=2.0, epoch=step / 40)
            if step == 20:
                assert wl.flush(10)  # the repeat at 30 comes in a later request than its first send
        wl.log(40, loss=5.0)  # a repeat with another value, in the same request as the first
    assert wl.stats["repeated_steps"] == 5 and wl.stats["sent_points"] == 84 and wl.stats["rejected"] == 0

    run = read_json(token, "/api/v1/runs/repeats/")
    assert run["attempt"] == 1 and [a["rewind"] for a in run["attempts"]] in ([], [None])
    assert read_points(token, "repeats", "epoch") == [{"step": s, "value": s / 40} for s in range(1, 41)]
    assert read_points(token, "repeats", "loss")[-1] == {"step": 40, "value": 1 / 40}
    warnings = [r.getMessage() for r in caplog.records if "repeated_steps" in r.getMessage()]
    # the same value again is quiet; another value is warned of once, naming the way to declare a rewind
    assert len(warnings) == 1 and "step 40 of loss" in warnings[0] and "wl.restart(" in warnings[0]


def test_a_new_step_below_the_highest_is_still_sent(console_server, token, tmp_path):
    with warninglight.watch(run_id="late", url=console_server.url, token=token, spool_dir=tmp_path, **FAST) as wl:
        for step in (10, 20, 30, 40, 15, 25, 15, 30, 41):  # a late evaluation of earlier checkpoints
            wl.log(step, {"eval/acc": step / 100})
    assert [p["step"] for p in read_points(token, "late", "eval/acc")] == [10, 15, 20, 25, 30, 40, 41]
    assert wl.stats["repeated_steps"] == 2
    assert read_json(token, "/api/v1/runs/late/")["attempt"] == 1


def test_a_rewind_in_the_same_process_is_declared_with_restart(console_server, token, tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="warninglight")
    with warninglight.watch(run_id="rewound", url=console_server.url, token=token, spool_dir=tmp_path, **FAST) as wl:
        for step in range(1, 31):
            wl.log(step, loss=1.0)
        wl.restart(21)  # reloaded the checkpoint of step 20 in this process: steps 21.. come again
        for step in range(21, 41):
            wl.log(step, loss=2.0)
    assert wl.stats["repeated_steps"] == 0 and wl.stats["sent_points"] == 50
    run = read_json(token, "/api/v1/runs/rewound/")
    assert run["attempt"] == 2
    assert [(a["number"], a["reason"], a["rewind"]) for a in run["attempts"] if a["number"] == 2] == [
        (2, "restart_phase", {"from_step": 30, "to_step": 21})]
    assert [(p["step"], p["value"]) for p in read_points(token, "rewound", "loss")] == (
        [(s, 1.0) for s in range(1, 21)] + [(s, 2.0) for s in range(21, 41)])
    assert not [r for r in caplog.records if "repeated_steps" in r.getMessage()]


def test_what_is_remembered_stays_bounded_and_never_lets_a_repeat_through():
    import random

    from warninglight.steps import MAX_LATE, MAX_RUNS, SeriesSteps

    regular = SeriesSteps()
    assert all(regular.add(s) for s in range(0, 1_000_000, 10))  # every 10 steps: one run
    assert len(regular.runs) == 1 and not regular.add(500_000) and regular.add(500_005)

    rng = random.Random(0)
    irregular, sent = SeriesSteps(), set()
    step = 0
    for _ in range(50_000):
        step += rng.choice((1, 2, 3, 7))
        late = step - rng.randrange(1, 500)
        for s in (step, late, step):
            accepted = irregular.add(s)
            assert not (accepted and s in sent)  # never twice
            sent.add(s)
    assert len(irregular.runs) <= MAX_RUNS and len(irregular.late) <= MAX_LATE


def test_a_new_process_resuming_a_checkpoint_is_still_a_restart(console_server, token, tmp_path):
    with warninglight.watch(run_id="resumed", url=console_server.url, token=token, spool_dir=tmp_path, **FAST) as first:
        for step in range(1, 31):
            first.log(step, loss=1.0)
    # a second process (its own watch: it has sent nothing) resumes the checkpoint of step 20
    with warninglight.watch(run_id="resumed", url=console_server.url, token=token, spool_dir=tmp_path, **FAST) as second:
        for step in range(21, 41):
            second.log(step, loss=2.0)
    assert first.stats["repeated_steps"] == second.stats["repeated_steps"] == 0
    run = read_json(token, "/api/v1/runs/resumed/")
    assert run["attempt"] == 2
    assert [a["rewind"] for a in run["attempts"] if a["number"] == 2] == [{"from_step": 30, "to_step": 21}]
