import re

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from ingest.models import Project, ProjectToken
from ingest.signals import set_up_project

OWNER_RE = re.compile(r"^\s*(?P<name>[^<>]+?)\s*<(?P<contact>[^<>]+)>\s*$")


def parse_owner(text: str):
    """'Pretrain on-call <#pretrain-oncall>' -> ('Pretrain on-call', '#pretrain-oncall')."""
    match = OWNER_RE.match(text)
    if not match:
        raise CommandError(f"--owner {text!r}: write it as 'NAME <CONTACT>', e.g. 'Pretrain on-call <oncall@example.com>'")
    return match["name"], match["contact"].strip()


class Command(BaseCommand):
    help = "Create a project (if missing) and print a new ingest token for it, once, on a line of its own."

    def add_arguments(self, parser):
        parser.add_argument("project_slug")
        parser.add_argument("--owner", help="the project's on-call owner, a person or team with a contact: 'NAME <CONTACT>'")
        parser.add_argument("--name", help="the project's display name")

    def handle(self, project_slug, owner=None, name=None, **options):
        if not re.fullmatch(r"[-a-zA-Z0-9_]{1,64}", project_slug):
            raise CommandError(f"project slug {project_slug!r}: use letters, digits, '-' and '_' (at most 64)")
        with transaction.atomic():
            project, created = Project.objects.get_or_create(slug=project_slug, defaults={"name": name or project_slug})
            if owner is not None:
                project.owner_name, project.owner_contact = parse_owner(owner)
            if name is not None:
                project.name = name
            project.save()
            _, raw = ProjectToken.issue(project)
            pack = set_up_project(project)
        if created:
            self.stderr.write(f"created project {project.slug}")
        if pack:
            self.stderr.write(f"installed the starter rule pack ({len(pack)} rules, owner {pack[0].owner})")
        elif not project.owner_name:
            self.stderr.write("no starter rule pack: the project has no owner yet; run again with --owner 'NAME <CONTACT>'")
        # stdout carries the token alone, so `TOKEN=$(manage.py issue_token p)` works.
        self.stdout.write(raw)
