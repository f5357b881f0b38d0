"""What ingest announces, for apps that build on its data (alerts subscribes in its AppConfig.ready).

Ingest never imports its subscribers: data flows one way, from ingest to whoever listens.
"""
from django.dispatch import Signal

# After a batch's transaction commits: receipt_id (a BatchReceipt). A receiver queues the slow work
# (evaluation); it must not raise, and a lost message is found again from the receipt's unevaluated mark.
batch_stored = Signal()

# While answering an ingest request: project, run_pk. Each receiver returns a list of action dicts
# ({"action", "alert", "rule"}) the job should carry out; the answer lists them all.
actions_requested = Signal()

# After a project gained an owner or was created by a command: project. A receiver returns what it
# set up (e.g. the starter rules), so the command can say so.
project_set_up = Signal()


def announce_batch_stored(receipt_id: int) -> None:
    batch_stored.send(sender=None, receipt_id=receipt_id)


def requested_actions(project, run_pk) -> list[dict]:
    return [action for _, actions in actions_requested.send(sender=None, project=project, run_pk=run_pk) for action in actions or ()]


def set_up_project(project) -> list:
    """What the subscribers set up for the project, in one list (empty when nothing was due)."""
    return [item for _, items in project_set_up.send(sender=None, project=project) for item in items or ()]
