"""Compare with: another run's same series beside this run's, only for a run of the same project the viewer sees."""
import pytest
from rest_framework.test import APIClient

from ingest.models import Run
from opsconsole.models import Membership, Role
from reviews.models import Review
from tests.conftest import Sender
from tests.factories import client_for

pytestmark = pytest.mark.django_db


def loss_points(base, steps=400):
    return [{"step": s, "metric": "loss", "value": base + 1000.0 / (s + 10)} for s in range(steps)]


@pytest.fixture
def runs(sender, other_token, django_capture_on_commit_callbacks):
    assert sender.post({"run": {"id": "llama-7"}, "points": loss_points(2.0)}).status_code == 202
    assert sender.post({"run": {"id": "llama-5", "name": "last good llama"}, "points": loss_points(1.5, 600)}).status_code == 202
    assert sender.post({"run": {"id": "llama-6"}, "points": [{"step": 0, "metric": "grad_norm", "value": 1.0}]}).status_code == 202
    Run.objects.filter(run_id="llama-5").update(reference=True)
    elsewhere = Sender(APIClient(), other_token, django_capture_on_commit_callbacks)
    assert elsewhere.post({"run": {"id": "vision-3"}, "points": loss_points(9.0)}).status_code == 202


def compare(user, run="llama-7", **params):
    client = APIClient()
    client.force_authenticate(user)
    return client.get(f"/api/v1/runs/{run}/series/", {"metric": "loss", **params})


def test_the_reference_runs_series_comes_at_the_steps_asked_in_its_own_name(owner, runs):
    body = compare(owner, compare="llama-5", start=100, end=499, buckets=1000, band=1).json()
    assert body["run"] == "llama-5" and body["name"] == "last good llama"
    # Past this run's last step (399) too: the steps asked for are the reference's.
    assert body["step"] == list(range(100, 500))
    assert body["last"][0] == pytest.approx(1.5 + 1000.0 / 110)
    assert "band" not in body  # the band drawn is this run's, never the other's

    wide = compare(owner, compare="llama-5", buckets=50).json()
    assert len(wide["step"]) <= 50 and max(wide["max"]) == pytest.approx(1.5 + 100.0)


def test_a_compared_run_that_never_sent_the_series_draws_nothing(owner, runs):
    body = compare(owner, compare="llama-6").json()
    assert body["run"] == "llama-6" and body["step"] == [] and body["last"] == []


def test_an_outsider_gets_nothing(outsider, runs):
    assert compare(outsider, compare="llama-5").status_code == 404
    # From their own run, naming one they cannot see reads the same as naming none that exists.
    hidden, absent = compare(outsider, run="vision-3", compare="llama-5"), compare(outsider, run="vision-3", compare="no-such-run")
    assert hidden.status_code == absent.status_code == 404
    assert hidden.json() == absent.json()
    assert "llama-5" not in hidden.content.decode()


def test_a_run_of_another_project_is_refused_even_to_someone_who_sees_both(owner, other_project, runs):
    Membership.objects.create(user=owner, project=other_project, role=Role.VIEWER)
    assert compare(owner, run="vision-3").status_code == 200  # they may see it on its own page
    refused, absent = compare(owner, compare="vision-3"), compare(owner, compare="no-such-run")
    assert refused.status_code == absent.status_code == 404 and refused.json() == absent.json()

    page = client_for(owner).get("/runs/llama-7/", {"compare": "vision-3"}).content.decode()
    assert 'value="vision-3"' not in page and 'value="llama-5"' in page


def test_a_bad_run_id_is_a_400_naming_the_parameter(owner, runs):
    response = compare(owner, compare="no spaces allowed")
    assert response.status_code == 400 and "compare" in response.content.decode()


def test_the_page_offers_the_references_first_then_the_projects_runs_and_selects_the_linked_one(owner, project, runs):
    Review.objects.create(run=Run.objects.get(run_id="llama-7"), trigger="manual", opened_at="2026-01-01T00:00:00Z",
                          comparison=Run.objects.get(run_id="llama-6"))
    Run.objects.create(project=project, run_id="mistral-1", name="a mistral")
    page = client_for(owner).get("/runs/llama-7/", {"compare": "llama-5"}).content.decode()
    form = page[page.index('id="compare-form"'):page.index("</form>", page.index('id="compare-form"'))]
    references = form[form.index("Reference runs"):form.index("Other runs")]
    assert 'value="llama-5" data-label="last good llama" selected' in references
    assert 'value="llama-6"' in references and "llama-6 (a review's comparison)" in references
    assert 'value="mistral-1"' in form[form.index("Other runs of pretrain"):]
    assert 'value="llama-7"' not in form  # never the run itself

    found = client_for(owner).get("/runs/llama-7/", {"compare_q": "MISTRAL"}).content.decode()
    assert "Runs matching “MISTRAL”" in found and 'value="mistral-1"' in found
    missing = client_for(owner).get("/runs/llama-7/", {"compare_q": "nothing-like-it"}).content.decode()
    assert 'id="compare-no-match"' in missing
