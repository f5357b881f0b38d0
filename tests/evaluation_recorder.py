"""Imported into a test's Celery worker (`celery worker --include tests.evaluation_recorder`): every batch the
worker evaluates is appended to the file named by EVALUATION_RECORD as one JSON line (worker pid, run, receipt,
when its evaluation began and ended), so a test can see which process judged what, in which order, and when."""
import json
import os
import time

from alerts.signals import batch_evaluated

PATH = os.environ["EVALUATION_RECORD"]


def record(sender, run, receipt, now, receipts=(), **kwargs):
    ended = time.time()
    # One line per batch, those judged together included (alerts/batches.py).
    lines = "".join(json.dumps({"pid": os.getpid(), "run": run.pk, "receipt": r.pk, "began": now.timestamp(),
                                "ended": ended}) + "\n" for r in (receipts or [receipt]))
    with open(PATH, "a") as fh:  # one short append: lines of two processes do not interleave
        fh.write(lines)


batch_evaluated.connect(record, dispatch_uid="tests.evaluation_recorder")
