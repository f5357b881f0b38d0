"""One module per channel kind: `send(target: ChannelTarget, message: IncidentMessage) -> DeliveryOutcome`."""
