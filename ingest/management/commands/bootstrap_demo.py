import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from alerts.starter import install_starter_pack
from ingest.models import Project
from opsconsole.models import Membership, Role


class Command(BaseCommand):
    help = "Create the demo project and a login for it (the password is printed, and kept in var/demo-login.txt)."

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
