from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from opsconsole.models import PersonalToken


class Command(BaseCommand):
    help = "Print a new personal API token for a user (alone on stdout); scripts send it as 'Authorization: Bearer <token>'."

    def add_arguments(self, parser):
        parser.add_argument("username")

    def handle(self, username, **options):
        user = get_user_model().objects.filter(username=username, is_active=True).first()
        if user is None:
            raise CommandError(f"no active user {username!r}")
        _, raw = PersonalToken.issue(user)
        self.stdout.write(raw)
