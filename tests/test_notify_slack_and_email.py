"""Slack gets `text` and `blocks`; email goes through Django's backend to the channel's recipients."""
from alerts.models import Alert
from tests.notify_support import fire, make_channel, spike_rule


def test_slack_message_has_text_and_blocks_with_the_incident(project, sender, receiver, settings):
    settings.CONSOLE_URL = "https://console.example"
    spike_rule(project)
    make_channel(project, kind="slack", url=receiver.url + "/services/T000/B000/XXX")
    fire(sender, step=100, high=("layers.1",))
    [body] = receiver.bodies()
    assert set(body) == {"text", "blocks"}
    assert "grad-high" in body["text"] and "run-n" in body["text"] and "step 100" in body["text"]
    fields = {f["text"].split("\n")[0]: f["text"].split("\n", 1)[1] for f in body["blocks"][1]["fields"]}
    assert fields["*Component*"] == "layers.1" and fields["*Step*"] == "100"
    assert fields["*Owner*"] == "Pretrain on-call &lt;#pretrain-oncall&gt;"  # escaped for mrkdwn
    alert = Alert.objects.get()
    assert fields["*Magnitude*"] == f"{alert.magnitude} {alert.magnitude_unit}"
    assert "https://console.example/runs/run-n/?" in fields["*Run*"]
    links = body["blocks"][2]["elements"][0]["text"]
    assert "<https://runbooks.example/grad-high|Runbook>" in links


def test_email_goes_to_the_recipients(project, sender, mailoutbox):
    spike_rule(project)
    make_channel(project, kind="email", config={"recipients": ["oncall@example.com", "lead@example.com"]})
    fire(sender, step=100, high=("layers.1",))
    [mail] = mailoutbox
    assert mail.to == ["oncall@example.com", "lead@example.com"]
    assert "grad-high" in mail.subject and "run-n" in mail.subject and "step 100" in mail.subject
    assert "Component:  layers.1" in mail.body and "https://runbooks.example/grad-high" in mail.body
