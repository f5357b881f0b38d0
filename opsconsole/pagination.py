"""The API's one way to page a list: `?limit=` (default PAGE_SIZE, at most MAX_PAGE_SIZE) and `?offset=`.

Every list endpoint answers `{"count", "next", "previous", "results"}` (docs/api.md), so a list that grows with
the data never grows one answer: a client follows `next` until it is null. Bad values are a 400 naming the
parameter, as every other query parameter is (DRF's own pagination silently falls back to the default).
"""
from rest_framework import serializers
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.response import Response

PAGE_SIZE = 100
MAX_PAGE_SIZE = 500
MAX_OFFSET = 2**63 - 1


class PageQuerySerializer(serializers.Serializer):
    limit = serializers.IntegerField(required=False, min_value=1, max_value=MAX_PAGE_SIZE, default=PAGE_SIZE,
                                     help_text=f"items per page (default {PAGE_SIZE}, at most {MAX_PAGE_SIZE})")
    offset = serializers.IntegerField(required=False, min_value=0, max_value=MAX_OFFSET, default=0,
                                      help_text="items to skip: follow the answer's `next` rather than counting")


class Pagination(LimitOffsetPagination):
    default_limit = PAGE_SIZE
    max_limit = MAX_PAGE_SIZE

    def paginate_queryset(self, queryset, request, view=None):
        # Checked, not clamped: `?limit=0` or `?offset=abc` is the caller's mistake and gets a 400 naming it.
        wanted = {k: v for k, v in request.query_params.items() if k in (self.limit_query_param, self.offset_query_param)}
        checked = PageQuerySerializer(data=wanted)
        checked.is_valid(raise_exception=True)
        return super().paginate_queryset(queryset, request, view)

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        bounds = {
            self.limit_query_param: {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_SIZE, "default": PAGE_SIZE},
            self.offset_query_param: {"type": "integer", "minimum": 0, "maximum": MAX_OFFSET, "default": 0},
        }
        for parameter in parameters:
            parameter["schema"] = bounds.get(parameter["name"], parameter["schema"])
        return parameters


def paginated(request, view, items, as_dict) -> Response:
    """One page of `items` (a queryset, ordered) as the list envelope, each item through `as_dict`."""
    paginator = Pagination()
    page = paginator.paginate_queryset(items, request, view=view)
    return paginator.get_paginated_response([as_dict(item) for item in page])
