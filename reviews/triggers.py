"""When reviews open by themselves: an alert of a `review` rule, a schedule, or a decision's next-review trigger."""


def review_for_fired_alert(sender, alert, now, **kwargs):
    pass


def reviews_due_after_batch(sender, run, receipt, now, **kwargs):
    pass
