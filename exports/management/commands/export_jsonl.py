"""`manage.py export_jsonl --project SLUG | --run ID [--types alerts,events] [--since TIME] [--output FILE]`.

Writes what `GET /api/v1/projects/<slug>/export/` or `/api/v1/runs/<id>/export/` answers, line for line
(exports/jsonl.py, the one code path); without --output, to standard output.
"""
import sys

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from exports.jsonl import export_lines, parse_types, TYPES
from ingest.models import Project, Run


class Command(BaseCommand):
    help = "Export a run's or a project's alerts, incidents, events and decisions as JSON Lines."

    def add_arguments(self, parser):
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--project", help="project slug: every run of the project")
        which.add_argument("--run", help="run id")
        parser.add_argument("--types", default=",".join(TYPES), help=f"comma-separated, from {', '.join(TYPES)} (default: all)")
        parser.add_argument("--since", help="only records that began at or after this ISO 8601 time")
        parser.add_argument("--output", help="file to write (default: standard output)")

    def handle(self, *, project, run, types, since, output, **options):
        try:
            types = parse_types(types)
        except ValueError as exc:
            raise CommandError(f"--types: {exc}") from None
        when = None
        if since:
            when = parse_datetime(since)
            if when is None:
                raise CommandError(f"--since: not an ISO 8601 date-time: {since!r}")
            if timezone.is_naive(when):
                when = timezone.make_aware(when)  # as the API reads a time without a zone
        if project:
            scope = {"run__project": Project.objects.filter(slug=project).first()}
        else:
            scope = {"run": Run.objects.filter(run_id=run).first()}
        if None in scope.values():
            raise CommandError(f"no such {'project' if project else 'run'}: {project or run}")
        lines = export_lines(scope, types, when)
        if output:
            with open(output, "wb") as fh:
                fh.writelines(lines)
        elif self.stdout._out is sys.stdout:
            sys.stdout.buffer.writelines(lines)
        else:  # call_command(stdout=...) gives a text stream
            for line in lines:
                self.stdout.write(line.decode(), ending="")
