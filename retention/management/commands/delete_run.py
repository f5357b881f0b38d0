"""`manage.py delete_run RUN_ID [--yes]`: delete a run in chunks (archived instead if the decision log names it)."""
from django.core.management.base import BaseCommand, CommandError

from ingest.models import Run
from retention.purge import delete_run


class Command(BaseCommand):
    help = "Delete a run and its points in chunks; a run the decision log names is archived (points deleted, the rest kept)."

    def add_arguments(self, parser):
        parser.add_argument("run_id")
        parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")

    def handle(self, run_id, yes=False, **options):
        run = Run.objects.filter(run_id=run_id).first()
        if run is None:
            raise CommandError(f"no run {run_id!r}")
        if not yes and input(f"Delete run {run_id} of project {run.project}? Type 'yes': ").strip() != "yes":
            raise CommandError("not deleted")
        outcome = delete_run(run)
        done = "archived (its points deleted; the decision log names it)" if outcome.archived else "deleted"
        self.stdout.write(f"{run_id}: {done}; " + ", ".join(f"{n:,} {k.replace('_', ' ')}" for k, n in outcome.deleted.items()))
