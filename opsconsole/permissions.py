"""One answer to "may this caller see this project?" for pages, the API and websockets."""
from ingest.auth import ProjectTokenUser
from ingest.models import Project, Run
from opsconsole.models import Membership, Role


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


def role_in(user, project) -> str | None:
    """The user's role in the project (superusers act as rule admins); None for outsiders and job tokens."""
    if user is None or not user.is_authenticated or isinstance(user, ProjectTokenUser):
        return None
    if user.is_superuser:
        return Role.RULE_ADMIN
    return Membership.objects.filter(user=user, project=project).values_list("role", flat=True).first()


def can_edit_rules(user, project) -> bool:
    return role_in(user, project) == Role.RULE_ADMIN


def can_triage(user, project) -> bool:
    """Acknowledge, resolve, give verdicts and mute alerts: on-call and rule admins (never job tokens)."""
    return role_in(user, project) in (Role.ONCALL, Role.RULE_ADMIN)


def triage_project_ids(user, project_ids) -> set:
    """Of `project_ids`, those where the user may `can_triage`: one query for a page of many projects' alerts."""
    if user is None or not user.is_authenticated or isinstance(user, ProjectTokenUser) or not project_ids:
        return set()
    if user.is_superuser:
        return set(project_ids)
    return set(Membership.objects.filter(user=user, project_id__in=project_ids, role__in=(Role.ONCALL, Role.RULE_ADMIN))
               .values_list("project_id", flat=True))


def rule_admin_projects(user):
    """The projects whose rules the user may create, edit and delete: the queryset form of `can_edit_rules`."""
    if user is None or not user.is_authenticated or isinstance(user, ProjectTokenUser):
        return Project.objects.none()
    if user.is_superuser:
        return Project.objects.all()
    return Project.objects.filter(memberships__user=user, memberships__role=Role.RULE_ADMIN)


def reads_channels(user) -> bool:
    """Whether the caller may read notification channels at all: people, never a project's ingest token.

    A channel's URL is a credential (a Slack incoming webhook, `http://user:pass@host/`), and the ingest token
    sits in every job's config: it reads no channel and no delivery log.
    """
    return user is not None and user.is_authenticated and not isinstance(user, ProjectTokenUser)


def channel_projects(user):
    """The projects whose channels the user reads: `visible_projects`, none for an ingest token."""
    return visible_projects(user) if reads_channels(user) else Project.objects.none()


def can_see_channel_url(user, project) -> bool:
    """A channel's full URL is for the project's rule admins (who set it); other members see its host alone."""
    return can_edit_rules(user, project)


def channel_url_projects(user):
    """The queryset form of `can_see_channel_url`: the projects whose channel URLs the user sees in full."""
    return rule_admin_projects(user)
