"""A backtest replays up to BACKTEST_MAX_SECONDS of a rule: on the evaluation workers' queue it would hold another
project's batches for that long, so it goes to a queue of its own (docker-compose.yml's `backtester`)."""
from opsconsole.celery import app


def queue_of(task_name):
    return app.amqp.router.route({}, task_name)["queue"].name


def test_backtests_evaluations_and_deliveries_go_to_three_queues():
    assert queue_of("alerts.tasks.run_backtest") == "backtests"
    assert queue_of("alerts.tasks.evaluate_batch") == "celery"
    assert queue_of("notifications.tasks.deliver") == "notifications"


def test_a_worker_started_without_a_queue_consumes_every_one():
    assert {q.name for q in app.conf.task_queues} == {"celery", "notifications", "backtests"}
