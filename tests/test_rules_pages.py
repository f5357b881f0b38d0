"""The console's rules pages: who sees, creates, edits and deletes what; the detail page; the form's round trip."""
import pytest

from alerts.models import Rule, RuleRevision
from ingest.models import Run
from tests.factories import client_for, make_alert, make_rule

pytestmark = pytest.mark.django_db


@pytest.fixture
def rule(project, owner):
    return make_rule(project, user=owner)


@pytest.fixture
def other_rule(other_project):
    return make_rule(other_project, name="vision-secret-rule")


# --- the list --------------------------------------------------------------------

def test_the_list_shows_visible_projects_rules_and_new_rule_only_to_rule_admins(owner, teammate, outsider, rule, other_rule):
    html = client_for(owner).get("/rules/").content.decode()
    assert "loss-spike" in html and "vision-secret-rule" not in html
    assert "Pretrain on-call &lt;#pretrain-oncall&gt;" in html and "notify" in html
    assert 'href="/rules/new/' in html

    response = client_for(teammate).get("/rules/")
    assert response.status_code == 200
    assert "loss-spike" in response.content.decode() and 'href="/rules/new/' not in response.content.decode()

    html = client_for(outsider).get("/rules/").content.decode()
    assert "vision-secret-rule" in html and "loss-spike" not in html and 'href="/rules/new/' not in html


def test_the_list_filters_by_project(django_user_model, project, other_project, rule, other_rule):
    admin = django_user_model.objects.create_superuser("root", password="pw-root")
    client = client_for(admin)
    both = client.get("/rules/").content.decode()
    assert "loss-spike" in both and "vision-secret-rule" in both
    only = client.get("/rules/", {"project": "vision"}).content.decode()
    assert "vision-secret-rule" in only and ">loss-spike<" not in only


def test_pages_need_a_login(rule):
    for path in ("/rules/", f"/rules/{rule.pk}/", "/rules/new/", f"/rules/{rule.pk}/edit/", f"/rules/{rule.pk}/delete/"):
        response = client_for(None).get(path)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"], path


def test_the_nav_links_to_the_rules(owner):
    assert 'href="/rules/"' in client_for(owner).get("/").content.decode()


# --- the detail page ---------------------------------------------------------------

def test_the_detail_shows_the_governance_fields_and_the_rule_in_words(owner, rule):
    html = client_for(owner).get(f"/rules/{rule.pk}/").content.decode()
    assert "Training loss above its band." in html
    assert "Pretrain on-call &lt;#pretrain-oncall&gt;" in html
    assert 'href="https://runbooks.example/loss-spike"' in html
    assert "fires after 3 points in a row; resolves after 10 clear points in a row" in html
    assert "the run as a whole only" in html  # component ""
    assert "team=pretrain" in html  # run tags
    assert "warmup" in html  # the phases a band skips by default
    settings = html[html.index('id="rule-params"'):].split("</dl>")[0]
    assert "<dt>Width</dt><dd><strong>6</strong>" in settings and "<dt>Direction</dt><dd><strong>above</strong>" in settings
    assert "{" not in html.split('<section class="panel rule-summary">')[1].split("Recent alerts")[0]  # no JSON object
    assert f'href="/rules/{rule.pk}/edit/"' in html and f'href="/rules/{rule.pk}/delete/"' in html


def test_teammate_reads_but_does_not_edit(teammate, rule):
    client = client_for(teammate)
    html = client.get(f"/rules/{rule.pk}/").content.decode()
    assert "loss-spike" in html and f"/rules/{rule.pk}/edit/" not in html
    assert client.get("/rules/new/").status_code == 403
    assert client.get(f"/rules/{rule.pk}/edit/").status_code == 403
    assert client.post(f"/rules/{rule.pk}/edit/", {"name": "renamed"}).status_code == 403
    assert client.get(f"/rules/{rule.pk}/delete/").status_code == 403
    assert client.post(f"/rules/{rule.pk}/delete/").status_code == 403
    assert Rule.objects.get(pk=rule.pk).name == "loss-spike"


def test_outsider_gets_404_for_another_projects_rule(outsider, rule):
    client = client_for(outsider)
    for path in (f"/rules/{rule.pk}/", f"/rules/{rule.pk}/edit/", f"/rules/{rule.pk}/delete/"):
        assert client.get(path).status_code == 404, path
    assert client.post(f"/rules/{rule.pk}/delete/").status_code == 404
    assert client.get("/rules/new/").status_code == 403  # a rule admin of no project
    assert Rule.objects.filter(pk=rule.pk).exists()


# --- create, edit, delete ------------------------------------------------------------

def form_data(**overrides):
    data = {
        "name": "grad-explosion",
        "project": "pretrain",
        "kind": "band",
        "description": "Gradient norm far above its band.",
        "owner": "Pretrain on-call <#pretrain-oncall>",
        "scope_metrics": "grad_norm",
        "scope_components": "matching",
        "scope_component": "*",
        "persistence_count": "3",
        "persistence_unit": "points",
        "persistence_resolve_points": "10",
        "param_band_direction": "above",
        "param_band_width": "10",
        "diagnostic_url": "https://runbooks.example/grad",
        "permitted_response": "notify",
        "enabled": "on",
    }
    data.update(overrides)
    return data


def test_owner_creates_a_rule_with_a_console_revision(owner):
    client = client_for(owner)
    page = client.get("/rules/new/")
    assert page.status_code == 200 and "scope" in page.content.decode()
    response = client.post("/rules/new/", form_data())
    rule = Rule.objects.get(name="grad-explosion")
    assert response.status_code == 302 and response["Location"] == f"/rules/{rule.pk}/"
    assert rule.scope == {"metrics": ["grad_norm"], "component": "*"} and rule.params == {"direction": "above", "width": 10}
    assert rule.enabled and rule.project.slug == "pretrain"
    revision = RuleRevision.objects.get()
    assert (revision.action, revision.source, revision.changed_by, revision.rule) == ("created", "console", owner, rule)
    assert "Rule grad-explosion created." in client.get(response["Location"]).content.decode()


def test_the_project_choice_is_only_projects_the_user_administers(owner, other_project):
    client = client_for(owner)
    html = client.get("/rules/new/").content.decode()
    assert 'value="pretrain"' in html and 'value="vision"' not in html
    response = client.post("/rules/new/", form_data(project="vision"))
    assert response.status_code == 200 and "project" in response.context["form"].errors
    assert not Rule.objects.exists()


def test_owner_edits_a_rule_and_the_form_starts_from_the_rule(owner, rule):
    client = client_for(owner)
    page = client.get(f"/rules/{rule.pk}/edit/").content.decode()
    assert "Pretrain on-call &lt;#pretrain-oncall&gt;" in page and 'name="persistence_resolve_points" value="10"' in page
    data = form_data(name="loss-spike", kind="band", permitted_response="review", scope_metrics="loss",
                     scope_components="every", scope_component="")
    data.pop("enabled")  # unticked
    response = client.post(f"/rules/{rule.pk}/edit/", data)
    assert response.status_code == 302
    rule.refresh_from_db()
    assert rule.permitted_response == "review" and rule.enabled is False and rule.scope == {"metrics": ["loss"]}
    latest = RuleRevision.objects.filter(rule=rule).last()
    assert (latest.action, latest.source, latest.changed_by) == ("updated", "console", owner)


def test_a_duplicate_name_is_an_error_on_the_name(owner, rule):
    response = client_for(owner).post("/rules/new/", form_data(name="loss-spike"))
    assert response.status_code == 200
    assert "already has a rule named" in response.context["form"].errors["name"][0]
    assert Rule.objects.count() == 1


def test_malformed_json_in_the_advanced_boxes_is_an_error_on_that_field(owner):
    response = client_for(owner).post("/rules/new/", form_data(params='{"width": 6,}', persistence="[1, 2]"))
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert "not valid JSON" in errors["params"][0]
    assert "JSON object" in errors["persistence"][0]
    assert not Rule.objects.exists()
    assert "not valid JSON" in response.content.decode()


def test_owner_deletes_a_rule_after_confirming(owner, rule):
    client = client_for(owner)
    confirm = client.get(f"/rules/{rule.pk}/delete/")
    assert confirm.status_code == 200 and "Delete rule" in confirm.content.decode()
    assert Rule.objects.filter(pk=rule.pk).exists()  # a GET deletes nothing
    response = client.post(f"/rules/{rule.pk}/delete/")
    assert response.status_code == 302
    assert not Rule.objects.filter(pk=rule.pk).exists()
    deleted = RuleRevision.objects.get(action="deleted")
    assert (deleted.source, deleted.changed_by, deleted.rule_name) == ("console", owner, "loss-spike")


def test_a_rule_with_alerts_is_not_deleted_and_the_page_says_why(owner, project, rule):
    make_alert(rule, Run.objects.create(project=project, run_id="pretrain/run-3"), "blocks.0", first_step=0, state="resolved")
    response = client_for(owner).post(f"/rules/{rule.pk}/delete/")
    assert response.status_code == 409
    assert "1 alert in its history" in response.content.decode()
    assert Rule.objects.filter(pk=rule.pk).exists()
    assert not RuleRevision.objects.filter(action="deleted").exists()
