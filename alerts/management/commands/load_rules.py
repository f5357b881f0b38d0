"""Rules as code: `manage.py load_rules FILE.yaml [--check]`.

The file holds `rules:`, a list of rules with the API's field names. With
--check it validates everything (governance included) and saves nothing, for a
team's CI; without it, the whole file is saved in one transaction or not at all.
"""
from pathlib import Path

import yaml
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from alerts.models import Rule
from alerts.rules import save_rule
from ingest.models import Project

FIELDS = ("kind", "description", "owner", "scope", "persistence", "diagnostic_url", "permitted_response", "params", "enabled")


class Command(BaseCommand):
    help = "Create or update alert rules from a YAML file; --check validates without saving."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)
        parser.add_argument("--check", action="store_true", help="validate only; exit 1 on any problem")

    def handle(self, file: Path, check=False, **options):
        try:
            document = yaml.safe_load(file.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise CommandError(f"{file}: {exc}") from None
        items = document.get("rules") if isinstance(document, dict) else None
        if not isinstance(items, list):
            raise CommandError(f"{file}: expected a mapping with a `rules:` list")
        problems = []
        rules = []
        for index, item in enumerate(items):
            where = f"rules[{index}]"
            if not isinstance(item, dict):
                problems.append(f"{where}: must be a mapping")
                continue
            unknown = set(item) - {"project", "name", *FIELDS}
            if unknown:
                problems.append(f"{where}: unknown fields {sorted(unknown)}")
            project = Project.objects.filter(slug=item.get("project")).first()
            if project is None:
                problems.append(f"{where}.project: no project {item.get('project')!r}")
                continue
            rule = Rule.objects.filter(project=project, name=item.get("name")).first() or Rule(project=project, name=item.get("name") or "")
            for field in FIELDS:
                default = {"params": {}, "enabled": True, "description": ""}.get(field, "")
                setattr(rule, field, item.get(field, default))
            try:
                rule.full_clean()
            except ValidationError as exc:
                for field, messages in exc.message_dict.items():
                    problems += [f"{where}.{field}: {m}" for m in messages]
            rules.append(rule)
        if problems:
            raise CommandError(f"{file}: {len(problems)} problem(s)\n  " + "\n  ".join(problems))
        if check:
            self.stdout.write(f"{file}: {len(rules)} rule(s) valid")
            return
        with transaction.atomic():
            for rule in rules:
                save_rule(rule, source="load_rules")
        self.stdout.write(f"{file}: {len(rules)} rule(s) saved")
