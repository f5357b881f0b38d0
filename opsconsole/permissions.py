"""One answer to "may this caller see this project?" for pages, the API and websockets."""
from ingest.auth import ProjectTokenUser
from ingest.models import Project, Run


def visible_projects(user):
    if user is None or not user.is_authenticated:
        return Project.objects.none()
    if isinstance(user, ProjectTokenUser):
        return Project.objects.filter(pk=user.token.project_id)
    if user.is_superuser:
        return Project.objects.all()
    return Project.objects.filter(memberships__user=user)


def visible_runs(user):
    return Run.objects.filter(project__in=visible_projects(user)).select_related("project")
