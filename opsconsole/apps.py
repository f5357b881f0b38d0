from django.apps import AppConfig


class OpsConsoleConfig(AppConfig):
    name = "opsconsole"
    verbose_name = "Warning Light console"
