"""The reviews app's pages: a review, the decision log, a run's chronicle and a project's interruptions."""
from django.contrib.auth.decorators import login_required


# --- reviews and the decision log

@login_required
def review(request, pk):
    raise NotImplementedError


@login_required
def decision_log(request):
    raise NotImplementedError


# --- the chronicle and the postmortem
