"""What the reviews' domain announces, for the task layer above it (reviews/tasks.py subscribes in ReviewsConfig.ready).

The domain modules (triggers, lifecycle) never import the tasks that carry their work to a worker.
"""
from django.dispatch import Signal

# A review was opened and its transaction committed: review_id. Its steps 1-5 are to be filled now.
review_opened = Signal()
