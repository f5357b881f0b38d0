"""The notifications app's DRF views: a project's channels (CRUD), a test message, each channel's delivery log.

Members of a project read its channels; rule admins create, edit, delete and test them (`can_edit_rules`, the
helper the pages use too); a viewer writing gets 403, anyone outside the project 404. A project's ingest token
reads no channel (403): it sits in every job's config, and a channel's URL is a credential. The URL is answered
in full to the project's rule admins only; other members get `url` null and `host` (`can_see_channel_url`).
The secret is write-only: answers say `has_secret`, never the value. Bad input is a 400 naming the field
(`config.<key>` for a kind's settings), and nothing of a refused create is stored.
"""
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError, transaction
from drf_spectacular.utils import extend_schema, extend_schema_field, extend_schema_view, OpenApiParameter
from rest_framework import exceptions, permissions, serializers, status as http, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.settings import api_settings

from alerts.serializers import VisibleProjectField
from ingest.models import Project
from notifications import channels as domain
from notifications.models import Channel, ChannelKind, Delivery, DeliveryStatus
from notifications.redact import redact_detail, url_host
from notifications.status import ChannelGone, send_test, with_status
from opsconsole.pagination import Pagination
from opsconsole.permissions import can_edit_rules, can_see_channel_url, channel_projects, reads_channels
from opsconsole.request_guard import BoundedJSONParser
from opsconsole.rest import JsonTypesMixin
from opsconsole.schema import errors

MAX_LOG = 200


class DeliverySerializer(serializers.ModelSerializer):
    incident = serializers.IntegerField(source="notification.incident_id", allow_null=True, read_only=True,
                                        help_text="null for a test message")
    event = serializers.CharField(source="notification.event", allow_null=True, read_only=True)

    class Meta:
        model = Delivery
        fields = ["id", "incident", "event", "attempt", "at", "duration_ms", "status", "status_code", "detail", "test"]

    def to_representation(self, delivery):
        data = super().to_representation(delivery)
        hidden = self.context.get("hidden_url")  # the channel's URL, when the caller may see its host alone
        if hidden is not None:
            data["detail"] = redact_detail(data["detail"], hidden)
        return data


class ChannelStatusSerializer(serializers.Serializer):
    last_delivery = DeliverySerializer(allow_null=True)
    failed = serializers.IntegerField(help_text="notifications that failed for good")
    retrying = serializers.IntegerField(help_text="notifications waiting for another try")


@extend_schema_field({"type": "object", "additionalProperties": True})
class ConfigField(serializers.JSONField):
    pass


@extend_schema_field({"type": "string", "nullable": True, "maxLength": 500,
                      "description": "answered to the project's rule admins; null for other members, who see `host`"})
class ChannelUrlField(serializers.CharField):
    pass


class ChannelSerializer(JsonTypesMixin, serializers.ModelSerializer):
    """A notification channel as the API answers it: the secret never, `has_secret` instead."""

    project = VisibleProjectField(slug_field="slug", queryset=Project.objects.all())
    kind = serializers.ChoiceField(ChannelKind.choices)
    url = ChannelUrlField(allow_blank=True, required=False, max_length=500)
    host = serializers.SerializerMethodField(help_text="the URL's host (and port): what members who are not rule admins see")
    secret = serializers.CharField(write_only=True, required=False, allow_blank=True, max_length=500, trim_whitespace=False,
                                   help_text="write-only: never answered; \"\" clears it, leaving it out keeps it")
    has_secret = serializers.BooleanField(read_only=True)
    config = ConfigField(required=False, help_text="per kind: see docs/notifications.md")
    status = serializers.SerializerMethodField()

    class Meta:
        model = Channel
        fields = ["id", "project", "name", "kind", "url", "host", "secret", "has_secret", "config", "enabled", "status",
                  "created_at", "updated_at"]
        read_only_fields = ["id", "created_at", "updated_at"]
        validators = []  # the name's uniqueness is checked once the caller is known to edit the project

    def _shows_url(self, channel) -> bool:
        shown = self.context.setdefault("url_shown", {})  # per project: a list asks once, not once per channel
        if channel.project_id not in shown:
            shown[channel.project_id] = can_see_channel_url(self.context["request"].user, channel.project)
        return shown[channel.project_id]

    def get_host(self, channel) -> str:
        return url_host(channel.url)

    @extend_schema_field(ChannelStatusSerializer)
    def get_status(self, channel):
        if not hasattr(channel, "status"):  # a single channel; lists are given theirs at once (ChannelViewSet)
            with_status([channel])
        hidden = None if self._shows_url(channel) else channel.url
        return ChannelStatusSerializer(channel.status, context={"hidden_url": hidden}).data

    def to_representation(self, channel):
        data = super().to_representation(channel)
        if not self._shows_url(channel):
            data["url"] = None
        return data

    def validate_project(self, project):
        if not can_edit_rules(self.context["request"].user, project):
            raise exceptions.PermissionDenied(domain.EDIT_DENIED)
        if self.instance is not None and project.pk != self.instance.project_id:
            raise serializers.ValidationError("a channel cannot move to another project")
        return project

    def validate(self, attrs):
        project = attrs.get("project", getattr(self.instance, "project", None))
        name = attrs.get("name", getattr(self.instance, "name", None))
        others = Channel.objects.filter(project=project, name=name)
        if self.instance is not None:
            others = others.exclude(pk=self.instance.pk)
        if others.exists():
            raise serializers.ValidationError({"name": f"project {project.slug} already has a channel named {name!r}"})
        return attrs

    def _save(self, channel, changed):
        try:
            return domain.save_channel(channel, user=self.context["request"].user, source="api", changed=changed)
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.message_dict) from None
        except IntegrityError:
            raise serializers.ValidationError({"name": "a channel of this name was just created"}) from None

    def create(self, validated_data):
        return self._save(Channel(**validated_data), None)

    def update(self, instance, validated_data):
        before = domain.snapshot(instance)
        for key, value in validated_data.items():
            setattr(instance, key, value)
        return self._save(instance, domain.changed_fields(before, instance))


class ChannelGoneError(exceptions.APIException):
    status_code = http.HTTP_409_CONFLICT
    default_detail = "the channel was deleted while its test message was sent: nothing was logged"
    default_code = "channel_gone"


class PeopleReadChannels(permissions.BasePermission):
    message = ("a project's ingest token reads no channel (a channel's URL is a credential): "
               "use a personal token or the console")

    def has_permission(self, request, view):
        return reads_channels(request.user)


class EditsNeedRuleAdmin(permissions.BasePermission):
    message = domain.EDIT_DENIED

    def has_object_permission(self, request, view, obj):
        return request.method in permissions.SAFE_METHODS or can_edit_rules(request.user, obj.project)


@extend_schema_view(
    list=extend_schema(operation_id="channels_list", responses={200: ChannelSerializer(many=True), **errors(403)}, parameters=[
        OpenApiParameter("project", str, description="only this project's channels (its slug)")]),
    create=extend_schema(operation_id="channels_create", responses={201: ChannelSerializer, **errors(400, 403)}),
    retrieve=extend_schema(operation_id="channels_retrieve", responses={200: ChannelSerializer, **errors(403, 404)}),
    partial_update=extend_schema(operation_id="channels_partial_update", responses={200: ChannelSerializer, **errors(400, 403, 404)}),
    destroy=extend_schema(operation_id="channels_destroy", responses={204: None, **errors(403, 404)}),
)
class ChannelViewSet(viewsets.ModelViewSet):
    """A project's notification channels: members read them; its rule admins create, edit, delete and test them."""

    serializer_class = ChannelSerializer
    pagination_class = Pagination
    permission_classes = [*api_settings.DEFAULT_PERMISSION_CLASSES, PeopleReadChannels, EditsNeedRuleAdmin]
    parser_classes = [BoundedJSONParser]
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def get_queryset(self):
        channels = Channel.objects.filter(project__in=channel_projects(self.request.user)).select_related("project")
        if self.request.query_params.get("project"):
            channels = channels.filter(project__slug=self.request.query_params["project"])
        return channels

    def get_serializer(self, *args, **kwargs):
        if kwargs.get("many") and args:  # a list: every channel's status in three queries, not two per channel
            args = (with_status(args[0]), *args[1:])
        return super().get_serializer(*args, **kwargs)

    def create(self, request, *args, **kwargs):
        # One transaction for the whole create, the answer included: a step that fails after the row is written
        # leaves nothing behind.
        with transaction.atomic():
            return super().create(request, *args, **kwargs)

    def update(self, request, *args, **kwargs):
        with transaction.atomic():
            return super().update(request, *args, **kwargs)

    def get_success_headers(self, data):
        # DRF's default puts the serializer's `url` field here: for a channel that is where it sends, a credential
        # (and a CR/LF in it made the 201 a 500 after the row was saved), never where the channel itself is.
        return {"Location": self.reverse_action("detail", args=[data["id"]])}

    def perform_destroy(self, instance):
        if not domain.delete_channel(instance, user=self.request.user, source="api"):
            raise exceptions.NotFound("the channel was deleted meanwhile")

    @extend_schema(operation_id="channels_test", request=None, responses={200: DeliverySerializer, **errors(
        403, 404, 409, s409="the channel was deleted while its test message was sent")})
    @action(detail=True, methods=["post"], url_path="test")
    def test(self, request, pk=None):
        """Send the channel a test message now (rule admins): the answer is the try's delivery-log row.

        A test message is an incident message with `event` "test" (an Alertmanager gets it already resolved).
        A channel deleted while its test message was on its way answers 409, and nothing is logged.
        """
        channel = self.get_object()  # EditsNeedRuleAdmin: a POST needs a rule admin of the channel's project
        try:
            delivery = send_test(channel, request.user)
        except ChannelGone:
            raise ChannelGoneError() from None
        return Response(DeliverySerializer(delivery).data)

    @extend_schema(operation_id="channels_deliveries", responses={200: DeliverySerializer(many=True), **errors(403, 404)},
                   parameters=[OpenApiParameter("status", str, enum=DeliveryStatus.values, description="only tries of this status")])
    # Not paged (the newest 200 tries): without pagination_class=None the schema would describe the viewset's pages.
    @action(detail=True, methods=["get"], url_path="deliveries", pagination_class=None)
    def deliveries(self, request, pk=None):
        """The channel's delivery log, newest first (at most 200 tries): status, time, response code, detail."""
        channel = self.get_object()
        rows = Delivery.objects.filter(channel=channel).select_related("notification")
        wanted = request.query_params.get("status")
        if wanted is not None:
            if wanted not in DeliveryStatus.values:
                raise exceptions.ValidationError({"status": f"must be one of {', '.join(DeliveryStatus.values)}"})
            rows = rows.filter(status=wanted)
        hidden = None if can_see_channel_url(request.user, channel.project) else channel.url
        return Response(DeliverySerializer(rows[:MAX_LOG], many=True, context={"hidden_url": hidden}).data)
