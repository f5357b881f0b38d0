"""`manage.py prune`: apply every project's retention policy now (what the hourly beat task does)."""
from django.core.management.base import BaseCommand

from retention.prune import prune


class Command(BaseCommand):
    help = "Apply each project's retention policy now: aged points, rollups, alerts, incidents and reviews go, in chunks."

    def handle(self, **options):
        counts = prune()
        if not counts:
            self.stdout.write("No project has a retention policy: nothing to prune.")
        for slug, kinds in counts.items():
            words = ", ".join(f"{n:,} {kind.replace('_', ' ')}" for kind, n in kinds.items()) or "nothing to prune"
            self.stdout.write(f"{slug}: {words}")
