import os
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from alerts.starter import install_starter_pack
from ingest.models import Project, ProjectToken, hash_token
from opsconsole.models import Membership, Role


class Command(BaseCommand):
    help = ("Create the demo project, a login for it and an ingest token (printed; kept in var/demo-login.txt and "
            "var/demo-token.txt, so a second start prints the same ones).")

    def add_arguments(self, parser):
        parser.add_argument("--username", default="admin")

    def handle(self, username, **options):
        project, _ = Project.objects.get_or_create(
            slug="demo", defaults={"name": "Demo", "owner_name": "Demo on-call", "owner_contact": "oncall@localhost"}
        )
        install_starter_pack(project)
        saved = settings.VAR_DIR / "demo-login.txt"
        User = get_user_model()
        user = User.objects.filter(username=username).first()
        if user is None:
            password = secrets.token_urlsafe(9)
            user = User.objects.create_superuser(username, email="", password=password)
            settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
            saved.write_text(f"{username} {password}\n")
            saved.chmod(0o600)
        Membership.objects.get_or_create(user=user, project=project, defaults={"role": Role.RULE_ADMIN})
        if saved.exists():
            name, password = saved.read_text().split()
            self.stdout.write(f"Login: user {name}, password {password}")
        else:
            self.stdout.write(f"Login: user {username} (password set earlier; change it with manage.py changepassword)")
        kept = settings.VAR_DIR / "demo-token.txt"
        self.stdout.write(f"Ingest token for project 'demo': {self.demo_token(project, kept)}  (kept in {kept})")

    def demo_token(self, project, kept):
        """The kept token while it is still valid; a new one (kept) when it is missing or was revoked."""
        if kept.exists():
            raw = kept.read_text().strip()
            if ProjectToken.objects.filter(project=project, token_hash=hash_token(raw), revoked_at__isnull=True).exists():
                return raw
        _, raw = ProjectToken.issue(project)
        with os.fdopen(os.open(kept, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as fh:
            fh.write(raw + "\n")
        kept.chmod(0o600)
        return raw
