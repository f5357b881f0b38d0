"""The notifications app's pages: each project's channels with their last delivery, a channel's delivery log,
and the form to add or edit one (rule admins; others 403, non-members 404). Failures stand out: a banner on the
list and the channel's page, failed tries highlighted in the log. A channel's URL is a credential: rule admins
see it whole, other members its host alone (`can_see_channel_url`), in the delivery log's details too."""
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from notifications.channels import EDIT_DENIED, delete_channel, save_channel
from notifications.forms import ChannelForm
from notifications.models import Channel, Delivery
from notifications.redact import redact_detail, url_host
from notifications.status import ChannelGone, send_test, unrefreshed_pushes, with_status
from opsconsole.permissions import can_edit_rules, can_see_channel_url, channel_projects, rule_admin_projects

LOG_ROWS = 100


def _visible_channel(request, pk):
    return get_object_or_404(Channel.objects.filter(project__in=channel_projects(request.user)).select_related("project"), pk=pk)


def _editable_channel(request, pk):
    channel = _visible_channel(request, pk)
    if not can_edit_rules(request.user, channel.project):
        raise PermissionDenied(EDIT_DENIED)
    return channel


@login_required
def channel_list(request):
    projects = list(channel_projects(request.user).order_by("slug"))
    selected = request.GET.get("project") or ""
    channels = Channel.objects.filter(project__in=projects).select_related("project").order_by("project__slug", "name")
    if selected:
        channels = channels.filter(project__slug=selected)
    channels = with_status(channels)
    admin_of = set(rule_admin_projects(request.user).values_list("pk", flat=True))
    return render(request, "notifications/channels.html", {
        "channels": channels, "projects": projects, "selected": selected, "can_create": bool(admin_of),
        "failing": [c for c in channels if c.status["failed"] or c.status["retrying"]],
    })


@login_required
def channel_detail(request, pk):
    channel = with_status([_visible_channel(request, pk)])[0]
    log = list(Delivery.objects.filter(channel=channel).select_related("notification")[:LOG_ROWS])
    full_url = can_see_channel_url(request.user, channel.project)
    if not full_url:
        for delivery in log:
            delivery.detail = redact_detail(delivery.detail, channel.url)
    changes = channel.changes.select_related("by").order_by("-id")[:20]
    return render(request, "notifications/channel.html", {
        "channel": channel, "log": log, "changes": changes, "can_edit": can_edit_rules(request.user, channel.project),
        "shown_url": channel.url if full_url else url_host(channel.url), "full_url": full_url,
        "unrefreshed": unrefreshed_pushes(channel)})


def _form_page(request, form, channel):
    if request.method == "POST" and form.is_valid():
        saved, changed = form.apply()
        try:
            save_channel(saved, user=request.user, source="console", changed=changed)
        except ValidationError as exc:
            form.add_model_errors(exc)
        except IntegrityError:
            form.add_error("name", "this project already has a channel of this name")
        else:
            messages.success(request, f"Channel {saved.name} saved.")
            return redirect("console:channel", pk=saved.pk)
    status = 400 if request.method == "POST" else 200
    return render(request, "notifications/channel_form.html", {"form": form, "channel": channel}, status=status)


@login_required
def channel_create(request):
    projects = rule_admin_projects(request.user).order_by("slug")
    if not projects.exists():
        raise PermissionDenied(EDIT_DENIED)
    initial = {}
    if request.GET.get("project") and projects.filter(slug=request.GET["project"]).exists():
        initial["project"] = projects.get(slug=request.GET["project"])
    form = ChannelForm(request.POST if request.method == "POST" else None, projects=projects, initial=initial)
    return _form_page(request, form, None)


@login_required
def channel_edit(request, pk):
    channel = _editable_channel(request, pk)
    form = ChannelForm(request.POST if request.method == "POST" else None, projects=rule_admin_projects(request.user),
                       channel=channel)
    return _form_page(request, form, channel)


@login_required
@require_POST
def channel_delete(request, pk):
    channel = _editable_channel(request, pk)
    if delete_channel(channel, user=request.user, source="console"):
        messages.success(request, f"Channel {channel.name} deleted.")
    return redirect("console:channels")


@login_required
@require_POST
def channel_test(request, pk):
    channel = _editable_channel(request, pk)
    try:
        delivery = send_test(channel, request.user)
    except ChannelGone:
        return render(request, "notifications/channel_gone.html", {"channel": channel}, status=409)
    if delivery.status == "ok":
        messages.success(request, f"Test message delivered to {channel.name}.")
    else:
        messages.error(request, f"Test message to {channel.name} failed: {delivery.detail or delivery.status_code}")
    return redirect("console:channel", pk=channel.pk)
