"""Steps 1-5 of a run review, filled from the stored data (issue 12).

`fill(review)` returns the five steps as they stand now. Each step is its own module, named as the review
page names it, with one function taking the review and an optional shared `Context` (shared.py), so the
page can show them one by one:

1. identity.py: `identity`
2. hard_invariants.py: `invariants`
3. expectation.py: `expectation`
4. slices.py: `slices`
5. remaining_value.py: `remaining_value`

shared.py documents the dict every step returns; checkpoints.py holds the run's checkpoints and the rewind
proposal. Step 6, the decision, is the reviewer's (reviews/lifecycle.py).
"""
from __future__ import annotations

from reviews.steps import expectation, hard_invariants, identity, remaining_value, slices
from reviews.steps.shared import Context


def fill(review) -> list[dict]:
    """Steps 1-5 for the review as they stand now."""
    ctx = Context(review)
    return [identity.identity(review, ctx), hard_invariants.invariants(review, ctx), expectation.expectation(review, ctx),
            slices.slices(review, ctx), remaining_value.remaining_value(review, ctx)]
