"""`manage.py delete_project SLUG [--yes]`: delete a project run by run in chunks (archived if its decision log holds entries)."""
from django.core.management.base import BaseCommand, CommandError

from ingest.models import Project
from retention.purge import delete_project


class Command(BaseCommand):
    help = "Delete a project and its runs in chunks; a project whose decision log holds entries is archived instead."

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")

    def handle(self, slug, yes=False, **options):
        project = Project.objects.filter(slug=slug).first()
        if project is None:
            raise CommandError(f"no project {slug!r}")
        if not yes and input(f"Delete project {slug} and its {project.runs.count():,} runs? Type 'yes': ").strip() != "yes":
            raise CommandError("not deleted")
        outcome = delete_project(project)
        done = "archived (its decision log holds entries; tokens revoked)" if outcome.archived else "deleted"
        self.stdout.write(f"{slug}: {done}; {outcome.runs_deleted:,} runs deleted, {outcome.runs_archived:,} archived")
