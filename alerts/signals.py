"""What alerts announce, for apps that build on them (reviews subscribes in its AppConfig.ready).

Alerts never import their subscribers. Receivers run inside the transaction that made the change, so what
they write commits or rolls back with it; they must be quick and must not raise.
"""
from django.dispatch import Signal

# Alerts were created and put in incidents (evaluation, the silent-run sweep): alerts (of one run, each with its
# rule, run and incident loaded, in the order they arrived), now. One signal for all of them: a storm's receivers
# read what they need once, not once an alert.
alerts_fired = Signal()

# A run's batch, or batches judged together (alerts/batches.py), was evaluated: run, receipt (the latest),
# receipts (all of them, in arrival order), now. Step-based work due at the run's new last step goes here.
batch_evaluated = Signal()

# An incident opened or changed (an alert joined it, its origin or state followed its alerts, a person acted on it):
# incident (its run loaded, fields as they now stand), kinds (IncidentChangeKind values, in order), now.
incident_changed = Signal()
