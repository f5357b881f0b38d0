"""`warninglight follow` on files a job is still writing: points written after it started arrive, and a
last record cut short is read once it is complete (TensorBoard's loader waits for it)."""
import signal

from tests.client.follow_support import add, f32, follow_command, wait_for_points, write_scalars
from tests.client.support import need, read_json, read_points

need("torch")
need("tensorboard")

from warninglight.follow import Follower  # noqa: E402


def test_points_written_while_following_arrive(console_server, token, tmp_path):
    logs = tmp_path / "logs"
    writer = write_scalars(logs / "live", [(s, "train/loss", 1.0 / (s + 1)) for s in range(10)])
    follower = follow_command(logs, "--interval", "0.2", "--spool-dir", tmp_path / "spool", url=console_server.url,
                              token=token, background=True)
    try:
        assert [p["step"] for p in wait_for_points(token, "live", "loss", 10)] == list(range(10))
        add(writer, [(s, "train/loss", 1.0 / (s + 1)) for s in range(10, 25)])  # the job goes on
        points = wait_for_points(token, "live", "loss", 25)
        assert points == [{"step": s, "value": f32(1.0 / (s + 1))} for s in range(25)]
    finally:
        writer.close()
        follower.send_signal(signal.SIGINT)
        _, stderr = follower.communicate(timeout=60)
    assert follower.returncode == 0, stderr
    assert "25 points read" in stderr
    assert read_json(token, "/api/v1/runs/live/")["attempt"] == 1


def test_a_truncated_last_record_is_read_once_complete(console_server, token, tmp_path):
    source = tmp_path / "source"
    write_scalars(source, [(s, "train/loss", 2.0 - s / 100) for s in range(30)]).close()
    (written,) = source.glob("events.out.tfevents.*")
    data = written.read_bytes()

    run_dir = tmp_path / "logs" / "cut"
    run_dir.mkdir(parents=True)
    copy = run_dir / written.name
    copy.write_bytes(data[:-7])  # the job was writing the last record (step 29)
    follower = Follower(tmp_path / "logs", console_server.url, token, spool_dir=tmp_path / "spool", flush_seconds=0.05)
    try:
        assert follower.poll() == 29
        assert follower.flush()
        assert [p["step"] for p in read_points(token, "cut", "loss")] == list(range(29))

        with copy.open("ab") as fh:  # the record completed
            fh.write(data[-7:])
        assert follower.poll() == 1
        assert follower.flush()
    finally:
        follower.close()
    assert read_points(token, "cut", "loss") == [{"step": s, "value": f32(2.0 - s / 100)} for s in range(30)]
    assert read_json(token, "/api/v1/runs/cut/")["attempt"] == 1
