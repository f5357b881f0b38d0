from django.core.management.base import BaseCommand, CommandError

from ingest.models import Run


class Command(BaseCommand):
    help = "Mark runs as reference runs of their project (their telemetry joins the baseline bands), or unmark them."

    def add_arguments(self, parser):
        parser.add_argument("run_ids", nargs="+")
        parser.add_argument("--off", action="store_true", help="stop using these runs as references")

    def handle(self, run_ids, off=False, **options):
        missing = sorted(set(run_ids) - set(Run.objects.filter(run_id__in=run_ids).values_list("run_id", flat=True)))
        if missing:
            raise CommandError(f"no such run: {', '.join(missing)}")
        changed = Run.objects.filter(run_id__in=run_ids).exclude(reference=not off).update(reference=not off)
        state = "no longer reference runs" if off else "reference runs"
        self.stdout.write(f"{len(run_ids)} run(s) are {state} ({changed} changed)")
