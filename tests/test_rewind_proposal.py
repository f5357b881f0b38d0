"""The rewind an incident review proposes: the latest checkpoint at least 100 steps before the onset (PaLM)."""
import pytest

from ingest.models import Run
from reviews.steps.checkpoints import rewind_proposal
from tests.review_support import send, series

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(sender):
    phases = [{"step": s, "phase": "checkpoint"} for s in (100, 200, 300, 400, 500)]
    send(sender, "spiky", series("loss", range(560), [2.0] * 560), phases=phases)
    return Run.objects.get(run_id="spiky")


def test_the_proposal_restarts_100_steps_before_the_onset_and_skips_the_batches_up_to_the_alert(run):
    proposal = rewind_proposal(run, onset_step=430, alert_step=450)
    assert proposal == {
        "checkpoint_step": 300, "onset_step": 430, "alert_step": 450, "margin": 100, "newest_step": 559,
        "steps_redone": 259,
        "alert_checkpoint_step": 400, "alert_checkpoint_steps_redone": 159,
        "fewer_steps_than_alert_checkpoint": -100,  # a hundred steps more than restarting at the checkpoint of 400
        "alert_checkpoint_after_onset": False,
        "skip_batches": {"from_step": 301, "to_step": 450, "count": 150},
    }


def test_a_checkpoint_written_after_the_onset_is_named_as_such(run):
    proposal = rewind_proposal(run, onset_step=395, alert_step=420)
    assert (proposal["checkpoint_step"], proposal["alert_checkpoint_step"], proposal["alert_checkpoint_after_onset"]) == (200, 400, True)


def test_the_margin_is_a_setting_and_the_alert_defaults_to_the_onset(run):
    proposal = rewind_proposal(run, onset_step=430, margin=20)
    assert proposal["checkpoint_step"] == 400 and proposal["alert_step"] == 430
    assert proposal["skip_batches"] == {"from_step": 401, "to_step": 430, "count": 30}


def test_no_checkpoint_far_enough_before_the_onset_means_no_proposal(run):
    assert rewind_proposal(run, onset_step=150) is None


def test_checkpoints_of_a_history_thrown_away_are_not_proposed(sender, run):
    send(sender, "spiky", series("loss", range(350, 380), [2.5] * 30))  # rewound to 350: 400 and 500 are gone
    run.refresh_from_db()
    proposal = rewind_proposal(run, onset_step=375)
    assert proposal["checkpoint_step"] == 200 and proposal["newest_step"] == 379
    assert proposal["alert_checkpoint_step"] == 300
