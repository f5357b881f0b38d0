"""A component whose own weights are multiplied by 20 between two optimizer steps (outside the optimizer)
is reported - an `exploding` event naming that component, at that step, saying the weights jumped
outside the optimizer - at the default `health_every`, in a raw loop and in the real Hugging Face
Trainer; a normal run reports no such thing."""
import json

import pytest

from tests.client.support import closed_port, need, tiny_lm_data

torch = need("torch")

from tests.client.test_health_hooks import TinyLM, mlp, train  # noqa: E402


def jumps(events):
    return [e for e in events if e[2] == "exploding" and "outside the optimizer" in e[4]["trigger"]]


@pytest.mark.parametrize("optimizer", [True, False], ids=["optimizer", "no-optimizer"])
def test_a_x20_weight_jump_names_its_component_at_its_step(optimizer):
    def multiply(step, model, opt):
        if step == 23:
            with torch.no_grad():
                for p in model.blocks[0].parameters():
                    p.mul_(20.0)

    _, _, wl = train(TinyLM, 30, every=10, optimizer=optimizer, before_forward=multiply)
    found = jumps(wl.events)
    assert [(s, c) for s, c, *_ in found] == [(23, "blocks.0")]
    assert found[0][3] == pytest.approx(20.0, rel=1e-4)  # the norm ratio: nothing but the jump in between
    assert found[0][4]["weight_norm_after"] == pytest.approx(20 * found[0][4]["weight_norm_before"], rel=1e-4)
    assert wl.events[0] is found[0]  # the first thing reported: before any gradient of the layers it feeds


def test_a_jump_in_the_real_hf_trainer_is_named(tmp_path):
    transformers = need("transformers")
    need("accelerate")
    from warninglight.integrations.hf import WarningLightCallback

    class Tokens(torch.utils.data.Dataset):
        def __init__(self, n, seed):
            self.rows = tiny_lm_data(n, seed)

        def __len__(self):
            return len(self.rows)

        def __getitem__(self, i):
            return {"input_ids": self.rows[i], "labels": self.rows[i]}

    class Multiply(transformers.TrainerCallback):
        def on_step_begin(self, args, state, control, model=None, **kwargs):
            if state.global_step == 16:  # before the forward pass of step 17
                with torch.no_grad():
                    for p in model.transformer.h[0].parameters():
                        p.mul_(20.0)

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        n_layer=2, n_embd=32, n_head=2, n_positions=32, vocab_size=64, bos_token_id=0, eos_token_id=0))
    callback = WarningLightCallback(run_id="hf-jump", url=f"http://127.0.0.1:{closed_port()}", token="wl_x",
                                    spool_dir=tmp_path / "spool", retries=0, flush_seconds=0.05, code_rev=False)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"), max_steps=25, per_device_train_batch_size=8, learning_rate=3e-3,
        logging_steps=5, save_strategy="no", eval_strategy="no", report_to=[], use_cpu=True,
        dataloader_num_workers=0, disable_tqdm=True, seed=0)
    transformers.Trainer(model=model, args=args, train_dataset=Tokens(400, 1), callbacks=[callback, Multiply()]).train()

    lines = [json.loads(x) for x in (tmp_path / "spool" / "hf-jump.ndjson").read_text().splitlines()]
    events = [x for x in lines if x["type"] == "event"]
    found = [e for e in events if e["condition"] == "exploding" and "outside the optimizer" in e["detail"]["trigger"]]
    assert [(e["step"], e["component"]) for e in found] == [(17, "transformer.h.0")]
    assert found[0]["magnitude"] == pytest.approx(20.0, rel=1e-3)
    assert events[0] == found[0]


@pytest.mark.parametrize("make_model", [TinyLM, mlp], ids=["transformer", "mlp"])
@pytest.mark.parametrize("every,optimizer", [(10, True), (10, False), (1, True)])
def test_a_normal_run_reports_no_weight_jump(make_model, every, optimizer):
    _, _, wl = train(make_model, 200, every=every, optimizer=optimizer, lr=1e-2)
    assert wl.events == []
