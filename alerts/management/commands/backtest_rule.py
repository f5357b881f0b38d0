"""Backtesting from the shell: `manage.py backtest_rule FILE.yaml [--runs ID …] [--project SLUG] [--tags K=V …]`.

The file holds one rule with the API's field names (as `load_rules` takes each item; a `rules:` list is
backtested rule by rule), or `rule: <id>` for a saved one. Nothing is saved. It prints the alerts each rule
would fire, the summary (runs, alerts, pages, the predicted false-alarm rate) and what a backtest cannot
reproduce; --json prints the API's answer instead.
"""
import json
from pathlib import Path

import yaml
from django.core.management.base import BaseCommand, CommandError
from rest_framework import exceptions

from alerts.backtest import backtest
from alerts.serializers import BacktestRequestSerializer
from opsconsole.rest import error_paths


class Command(BaseCommand):
    help = "What a rule (from a YAML file) would fire on stored runs, replayed by the live engine; saves nothing."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)
        parser.add_argument("--runs", nargs="+", metavar="ID", help="run ids to replay")
        parser.add_argument("--project", help="the project (a draft's own project is the default)")
        parser.add_argument("--tags", nargs="+", metavar="KEY=VALUE", help="only runs with these tags")
        parser.add_argument("--since", help="only runs last seen at or after this time (ISO 8601)")
        parser.add_argument("--until", help="only runs created at or before this time (ISO 8601)")
        parser.add_argument("--json", action="store_true", help="print the result as the API answers it")

    def handle(self, file: Path, **options):
        try:
            document = yaml.safe_load(file.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise CommandError(f"{file}: {exc}") from None
        items = document.get("rules") if isinstance(document, dict) and "rules" in document else [document]
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise CommandError(f"{file}: expected a rule (a mapping), or a `rules:` list of them")
        selection = {k: options[k] for k in ("runs", "project", "since", "until") if options.get(k)}
        if options.get("tags"):
            try:
                selection["tags"] = dict(tag.split("=", 1) for tag in options["tags"])
            except ValueError:
                raise CommandError("--tags: each must be KEY=VALUE") from None
        results = []
        for index, item in enumerate(items):
            where = f"{file}" if len(items) == 1 else f"{file}: rules[{index}]"
            asked = BacktestRequestSerializer(data={**item, **selection}, context={"all_projects": True})
            try:
                asked.is_valid(raise_exception=True)
                rule, runs = asked.rule_and_runs()
            except exceptions.APIException as exc:
                raise CommandError(f"{where}:\n  " + "\n  ".join(f"{e['path']}: {e['message']}" for e in error_paths(exc.detail))) from None
            result = backtest(rule, runs)
            results.append(result)
            if not options["json"]:
                self.show(rule, result)
        if options["json"]:
            self.stdout.write(json.dumps(results[0] if len(results) == 1 else results, indent=2))

    def show(self, rule, result):
        out = self.stdout.write
        out(f"rule {rule.name!r} ({rule.kind}, {rule.permitted_response}) of project {rule.project.slug}")
        out(f"{'run':<28} {'component':<16} {'metric':<14} {'first':>8} {'fired':>8} {'last':>8}  magnitude")
        for a in result["would_fire"]:
            magnitude = "" if a["magnitude"] is None else f"{a['magnitude']:.4g} {a['unit']}"
            out(f"{a['run']:<28} {a['component'] or '-':<16} {a['metric'] or a['condition'] or '-':<14} "
                f"{a['first_step']:>8} {a['fired_step']:>8} {a['last_step']:>8}  {magnitude}")
        fa = result["false_alarms"]
        rate = fa["prediction"]
        if fa["rate"] is not None:
            low, high = fa["interval"]
            rate = f"{fa['rate']:.0%} (95% {low:.0%}–{high:.0%}, {fa['verdicts']} overlapping verdicts)"
        out(f"runs {result['runs']}, runs with alerts {result['runs_with_alerts']}, alerts {result['alerts']}, "
            f"pages {result['pages']}, predicted false alarms: {rate}")
        for fault in result["faults"]:
            out(f"stopped on run {fault['run']} at batch {fault['batch']}: {fault['error']}")
        out("cannot reproduce:")
        for limit in result["limits"]:
            out(f"  - {limit}")
