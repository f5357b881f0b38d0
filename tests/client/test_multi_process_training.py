"""Real multi-process training on CPU (gloo) against a live console with the starter pack: a plain loop and the
Hugging Face Trainer under `torchrun --nproc_per_node 2`, and Lightning's `strategy="ddp"` on 2 processes
(the jobs are tests/client/ddp_jobs.py, run as separate processes; the console reads them back).

* By default one sender per job: each run is one attempt without alerts, each step's loss stored once, and
  nothing under a rank's component (rank 1's watch sent nothing).
* With per-rank signals on, every rank sends its own loss and health as `rank<N>` / `rank<N>/<component>`
  beside the job's series from rank 0, still one attempt; a NaN written into rank 1's weights names
  `rank1/…` as the incident's origin.
"""
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from alerts.starter import install_starter_pack

from tests.client.support import CLIENT_DIR, Proxy, alerts_of, need, read_json, read_points

need("torch")

JOBS = Path(__file__).with_name("ddp_jobs.py")
STEPS = 20
NAN_STEP = 12


def free_port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def launch(console_server, token, tmp_path, job, torchrun=True):
    """Run a job of ddp_jobs.py as real processes, through a proxy that passes one request at a time."""
    with Proxy(console_server.port, serial=True) as proxy:
        run_job(proxy.url, token, tmp_path, job, torchrun)


def run_job(url, token, tmp_path, job, torchrun):
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") and not k.startswith("WARNINGLIGHT_")}
    env.update(WARNINGLIGHT_URL=url, WARNINGLIGHT_TOKEN=token, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(CLIENT_DIR), env.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    command = [sys.executable, str(JOBS), job, str(tmp_path)]
    if torchrun:
        command[1:1] = ["-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", "2",
                        "--master_addr", "127.0.0.1", "--master_port", str(free_port())]
    done = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=240)
    (tmp_path / f"{job}.log").write_text(done.stdout + done.stderr)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]


def reports(tmp_path, run_id):
    return {int(p.stem.rsplit("rank", 1)[1]): json.loads(p.read_text()) for p in tmp_path.glob(f"{run_id}.rank*.json")}


def assert_one_sender(token, run_id, tmp_path, steps=range(1, STEPS + 1)):
    run = read_json(token, f"/api/v1/runs/{run_id}/")
    assert run["attempt"] == 1 and [a["rewind"] for a in run["attempts"]] in ([], [None])
    assert alerts_of(token, run_id) == []
    assert [p["step"] for p in read_points(token, run_id, "loss")] == list(steps)  # each step's loss once
    assert read_points(token, run_id, "loss", component="rank1") == []
    ranks = reports(tmp_path, run_id)
    assert sorted(ranks) == [0, 1]
    assert ranks[0]["sending"] and ranks[0]["requests"] > 0
    assert ranks[1]["requests"] == 0 and ranks[1]["sent_points"] == 0  # rank 1's watch did nothing


def test_a_plain_loop_under_torchrun(console_server, project, token, tmp_path):
    install_starter_pack(project)
    launch(console_server, token, tmp_path, "loop")

    assert_one_sender(token, "ddp-loop", tmp_path)

    # Per-rank signals: the job's loss from rank 0, each rank's own under rank<N>, one attempt all the same.
    run_id = "ddp-loop-ranks"
    run = read_json(token, f"/api/v1/runs/{run_id}/")
    assert run["attempt"] == 1
    assert [p["step"] for p in read_points(token, run_id, "loss")] == list(range(1, STEPS + 1))
    for rank in (0, 1):
        own = read_points(token, run_id, "loss", component=f"rank{rank}")
        assert [p["step"] for p in own] == list(range(1, STEPS + 1))
        assert read_points(token, run_id, "weight_norm", component=f"rank{rank}/layers.1")
    rank1 = {p["step"]: p["value"] for p in read_points(token, run_id, "loss", component="rank1")}
    assert rank1[NAN_STEP] == "NaN" and isinstance(rank1[NAN_STEP - 1], float)
    incidents = read_json(token, f"/api/v1/incidents/?run={run_id}")["results"]
    assert incidents, alerts_of(token, run_id)
    origin = incidents[0]["origin"]
    assert origin["component"].startswith("rank1/layers.1") and origin["step"] == NAN_STEP, incidents[0]
    assert {p.name for p in (tmp_path / "spool").glob("*")} <= {f"{run_id}.rank0.ndjson", f"{run_id}.rank1.ndjson"}


def test_the_hf_trainer_under_torchrun(console_server, project, token, tmp_path):
    need("transformers")
    need("accelerate")
    install_starter_pack(project)
    launch(console_server, token, tmp_path, "hf")
    assert_one_sender(token, "ddp-hf", tmp_path)
    assert [p["step"] for p in read_points(token, "ddp-hf", "val_loss")] == [10, 20]


def test_lightning_ddp_on_two_processes(console_server, project, token, tmp_path):
    need("lightning.pytorch")
    install_starter_pack(project)
    launch(console_server, token, tmp_path, "lightning", torchrun=False)
    assert_one_sender(token, "ddp-lightning", tmp_path)
    assert [p["step"] for p in read_points(token, "ddp-lightning", "val_loss")] == [10, 20]
