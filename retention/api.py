"""The retention app's API: deleting a project (superusers only). A run's delete is the runs app's (runs/api.py)."""
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response
from rest_framework.views import APIView

from opsconsole.permissions import visible_projects
from opsconsole.schema import errors
from retention.purge import delete_project


class ProjectView(APIView):
    @extend_schema(operation_id="projects_destroy", responses={200: OpenApiTypes.OBJECT, **errors(403, 404)})
    def delete(self, request, slug):
        """Delete a project and all its runs, in chunks (superusers only). A project whose decision log holds
        entries is archived instead: runs the log names keep everything but their points, the rest are
        deleted, and its tokens are revoked."""
        project = get_object_or_404(visible_projects(request.user), slug=slug)
        if not request.user.is_superuser:
            raise PermissionDenied("only a superuser deletes a project")
        return Response(delete_project(project, by=request.user).as_dict())
