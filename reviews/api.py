"""The reviews app's API: reviews and their steps, decisions and the decision log, the chronicle."""
from rest_framework.views import APIView


# --- reviews and the decision log

class ReviewListView(APIView):
    pass


class ReviewDetailView(APIView):
    pass


class ReviewStepView(APIView):
    pass


class ReviewComparisonView(APIView):
    pass


class ReviewDecisionView(APIView):
    pass


class ReviewScheduleView(APIView):
    pass


class LogEntryListView(APIView):
    pass


class LogEntryDetailView(APIView):
    pass


# --- the chronicle and the postmortem
