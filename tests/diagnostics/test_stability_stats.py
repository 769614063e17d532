"""The stability statistics (OLMo-core's spike score and GAP max/mean/variance, Peri-LN's
variance figure) against direct computations, in training, the probe and inspect."""

from __future__ import annotations

import math
import os
import re
import signal
import sys
from pathlib import Path

import pytest
import torch

from normlab import ModelConfig, TransformerLM
from normlab.core.fsutil import read_jsonl
from normlab.diagnostics import spikes
from normlab.diagnostics.probe import probe_model
from normlab.diagnostics.training import TrainingDiagnostics
from normlab.stats.tensors import Moments, activation_moments, moments

SPIKE_KEYS = ("spike_score", "spikes", "loss_spike_z", "grad_norm_spike_z")
GAP_KEYS = ("act_mean", "act_var", "param_max", "param_mean", "param_var", "grad_max", "grad_mean", "grad_var")


def _olmo(values: list[tuple[float, float]], window: int, threshold: float) -> tuple[list[bool], list[list[float]]]:
    """OLMo-core's StabilityMonitorCallback rule, written out in plain Python: per step, is
    either signal above mean + threshold * std (population) of the ``window`` values before it."""
    flags, zs = [], []
    for t, now in enumerate(values):
        spike, z = False, []
        for i in range(2):
            past = [v[i] for v in values[max(0, t - window):t]]
            if len(past) < window:
                z.append(math.nan)
                continue
            mean = sum(past) / window
            std = math.sqrt(sum((p - mean) ** 2 for p in past) / window)
            if std < 1e-10:
                z.append(math.nan)
                continue
            spike |= now[i] > mean + threshold * std
            z.append((now[i] - mean) / std)
        flags.append(spike)
        zs.append(z)
    return flags, zs


def test_moments_match_direct_computation() -> None:
    g = torch.Generator().manual_seed(0)
    ts = [torch.randn(3, 4, generator=g) * 2 + 1, torch.randn(5, generator=g), torch.ones(2, 2)]
    flat = torch.cat([t.reshape(-1) for t in ts]).double()
    want = [flat.mean().item(), flat.var().item(), flat.abs().max().item()]  # unbiased, as torch.var_mean
    assert moments(ts, torch.float64).tolist() == pytest.approx(want, rel=1e-12)
    m = Moments()
    for t in ts:  # merged one tensor at a time, as inspect's gradient hook sees them
        m.add(t)
    assert m.row() == pytest.approx(want, rel=1e-12)
    assert all(math.isnan(v) for v in moments([]).tolist()) and all(math.isnan(v) for v in Moments().row())
    xs = torch.randn(3, 2, 4, 5, generator=g)  # (states, sequences, T, d)
    mean, var = activation_moments(xs)
    for s in range(3):  # OLMo-core: per sequence over its entries, then the average over sequences
        assert var[s].item() == pytest.approx(sum(xs[s, b].var().item() for b in range(2)) / 2, rel=1e-5)
        assert mean[s].item() == pytest.approx(xs[s].mean().item(), abs=1e-6)


def test_spike_window_scores_as_olmo_core_and_survives_a_checkpoint() -> None:
    g = torch.Generator().manual_seed(1)
    values = [(2.0 + 0.05 * torch.randn((), generator=g).item(), 1.0 + 0.1 * torch.randn((), generator=g).item())
              for _ in range(60)]
    values[20] = (9.0, values[20][1])          # a loss spike
    values[41] = (values[41][0], 30.0)         # a gradient-norm spike
    values[42] = (12.0, 40.0)                  # both at one step: one spike step
    values = [(float(torch.tensor(a)), float(torch.tensor(b))) for a, b in values]  # what float32 tensors hold
    flags, zs = _olmo(values, 8, 6.0)
    assert sum(flags) >= 3
    straight = spikes.SpikeWindow(torch.device("cpu"), 8, 6.0)
    resumed = spikes.SpikeWindow(torch.device("cpu"), 8, 6.0)
    done = 0
    for cut in (3, 10, 11, 25, 33, 42, 43, 60):  # irregular diagnostics steps
        for t in range(done, cut):
            for w in (straight, resumed):
                w.record(torch.tensor(values[t][0]), torch.tensor(values[t][1]))
            if t == 28:  # a checkpoint between two scans, with unscanned steps in it
                state = resumed.state()
                resumed = spikes.SpikeWindow(torch.device("cpu"), 8, 6.0)
                resumed.load(state)
        a, b = straight.scan(), resumed.scan()
        assert int(a.count) == int(b.count) == sum(flags[:cut]) and a.steps == b.steps == cut
        for i in range(2):
            finite = [z[i] for z in zs[done:cut] if not math.isnan(z[i])]
            want = max(finite) if finite else -math.inf
            assert a.largest_z(i).item() == b.largest_z(i).item() == pytest.approx(want, rel=1e-9)
        score = b.score()
        assert (score is None) if cut < 8 else score.item() == pytest.approx(sum(flags[:cut]) / cut)
        done = cut


def _loop(tmp_path, placement: str = "pre"):
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(vocab_size=17, context=8, n_layer=2, d_model=16, n_head=2,
                                      placement=placement, init="xavier"))
    g = torch.Generator().manual_seed(1)
    fixed = (torch.randint(0, 17, (3, 8), generator=g), torch.randint(0, 17, (3, 8), generator=g))
    return model, TrainingDiagnostics(model, tmp_path, fixed, every=1, fixed_rows=2), fixed, g


def test_training_gap_statistics_by_hand(tmp_path) -> None:
    model, diag, fixed, g = _loop(tmp_path)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    idx, tgt = torch.randint(0, 17, (4, 8), generator=g), torch.randint(0, 17, (4, 8), generator=g)
    _, loss = model(idx, tgt)
    loss.backward()
    diag.after_backward(1)
    block1 = [n for n, _ in model.named_parameters() if n.startswith("blocks.0.")]
    grads = torch.cat([p.grad.reshape(-1) for n, p in model.named_parameters() if n in block1])
    emb = model.wte.weight.grad.clone()
    opt.step()
    r = diag.after_step(1)
    w = torch.cat([p.detach().reshape(-1) for n, p in model.named_parameters() if n in block1])
    assert r["grad_var"][1] == pytest.approx(grads.var().item(), rel=1e-5)
    assert r["grad_mean"][1] == pytest.approx(grads.mean().item(), rel=1e-4, abs=1e-9)
    assert r["grad_max"][0] == pytest.approx(emb.abs().max().item(), rel=1e-6)
    assert r["param_var"][1] == pytest.approx(w.var().item(), rel=1e-5)   # after the update
    assert r["param_max"][1] == pytest.approx(w.abs().max().item(), rel=1e-6)
    assert len(r["param_var"]) == len(r["grad_var"]) == 4                # embeddings, 2 blocks, head
    with torch.no_grad():  # the stream by hand, block after block
        states = [model.stream.begin(model.embed(fixed[0][:2]))]
        for b in model.blocks:
            states.append(b(states[-1]))
    x2 = states[2]
    assert r["act_var"][2] == pytest.approx((x2[0].var().item() + x2[1].var().item()) / 2, rel=1e-5)
    assert r["act_mean"][0] == pytest.approx(states[0].mean().item(), abs=1e-6)
    assert r["spikes"] == 0.0 and "spike_score" not in r  # no step recorded: nothing to score yet


def test_probe_gap_rows_by_hand() -> None:
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(vocab_size=13, context=8, n_layer=2, d_model=8, n_head=2, placement="pre"))
    g = torch.Generator().manual_seed(3)
    idx, tgt = torch.randint(0, 13, (2, 8), generator=g), torch.randint(0, 13, (2, 8), generator=g)
    rows = {(li, s, p, m): v for li, s, p, m, v in probe_model(model, idx, tgt, n_proj=0)}
    _, loss = model(idx, tgt)
    loss.backward()
    for li, block in enumerate(model.blocks, start=1):
        w = torch.cat([p.detach().reshape(-1) for p in block.parameters()])
        gr = torch.cat([p.grad.reshape(-1) for p in block.parameters()])
        assert rows[(li, "block", "all", "param_var")] == pytest.approx(w.var().item(), rel=1e-5)
        assert rows[(li, "block", "all", "grad_max")] == pytest.approx(gr.abs().max().item(), rel=1e-5)
        assert rows[(li, "block", "all", "grad_var")] == pytest.approx(gr.var().item(), rel=1e-4)
    assert (0, "stream", "x", "act_var") in rows and (2, "stream", "x", "act_mean") in rows


def test_inspect_reports_them_on_a_real_model(tmp_path) -> None:
    """A tiny random GPT-2 built locally: per-block parameter and gradient statistics and
    the stream's variance, against transformers' own forward and backward."""
    pytest.importorskip("transformers")
    sys.path.insert(0, str(Path(__file__).parents[1] / "inspect"))
    import tiny
    import transformers

    from normlab.cli import main

    d = os.environ.get("NORMLAB_DATA_DIR")
    if not d or not (Path(d) / "tinyshakespeare.txt").is_file():
        pytest.skip("Tiny Shakespeare not available (set NORMLAB_DATA_DIR)")
    corpus = (Path(d) / "tinyshakespeare.txt").read_text(encoding="utf-8")
    model = tiny.save("gpt2", corpus, tmp_path / "gpt2")
    text = tmp_path / "text.txt"
    text.write_text(corpus[:5000], encoding="utf-8")
    out = tmp_path / "out"
    assert main(["inspect", str(model), "--out", str(out), "--text", str(text), "--context", "32",
                 "--max-tokens", "96", "--quiet"]) == 0
    rows = {(int(r["layer"]), r["sublayer"], r["metric"]): float(r["value"]) for r in _csv(out / "probe.csv")}
    hf = transformers.GPT2LMHeadModel.from_pretrained(model)
    tok = transformers.AutoTokenizer.from_pretrained(model)
    ids = tok(corpus[:5000], add_special_tokens=False)["input_ids"]
    x = torch.tensor([ids[i * 32:(i + 1) * 32] for i in range(3)])
    out_hf = hf(x, output_hidden_states=True)
    logits = out_hf.logits
    loss = torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1).float(), x[:, 1:].flatten())
    loss.backward()
    for li, block in enumerate(hf.transformer.h, start=1):
        w = torch.cat([p.detach().reshape(-1) for p in block.parameters()]).double()
        gr = torch.cat([p.grad.reshape(-1) for p in block.parameters()]).double()
        assert rows[(li, "block", "param_var")] == pytest.approx(w.var().item(), rel=1e-9)
        assert rows[(li, "block", "param_mean")] == pytest.approx(w.mean().item(), rel=1e-9)
        assert rows[(li, "block", "grad_var")] == pytest.approx(gr.var().item(), rel=1e-4)
        assert rows[(li, "block", "grad_max")] == pytest.approx(gr.abs().max().item(), rel=1e-4)
    h1 = out_hf.hidden_states[1].detach()  # block 1's output, x_1
    assert rows[(1, "stream", "act_var")] == pytest.approx(sum(h1[b].var().item() for b in range(3)) / 3, rel=1e-5)
    assert rows[(1, "stream", "act_var")] > 0


def _csv(path: Path) -> list[dict]:
    import csv

    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_training_run_writes_them_resumes_exactly_and_the_page_draws_the_growth(tmp_path, data_dir,
                                                                                  monkeypatch) -> None:
    """A run with diagnostics writes every key; one stopped mid-run (unscanned steps in its
    checkpoint) and resumed writes the lines of the uninterrupted run, spike scores included;
    the run page draws the variance per layer over training as Peri-LN does."""
    from normlab.report import build_report
    from normlab.report.diag import diag_matrices
    from normlab.run.resolve import resolve
    from normlab.train import run_training
    from normlab.train.loop import Trainer

    monkeypatch.setattr(spikes, "WINDOW", 6)      # a window that fills in a tiny run
    monkeypatch.setattr(spikes, "THRESHOLD", 1.0)  # so that spikes happen and the count is tested
    sets = ["model.n_layer=3", "model.d_model=16", "model.n_head=2", "model.context=16", "train.batch_size=2",
            "train.steps=30", "train.eval_every=10", "train.eval_batches=1", "train.log_every=5",
            "train.checkpoint_every=10", "train.threads=1", "train.diag_every=4", "optim.warmup_steps=3",
            f"data.data_dir={data_dir}"]
    run_training(resolve(None, None, "pre", sets), tmp_path / "ref", quiet=True)
    ref = read_jsonl(tmp_path / "ref" / "diagnostics.jsonl")
    assert [r["step"] for r in ref] == list(range(4, 31, 4))
    for r in ref:
        assert all(k in r for k in GAP_KEYS) and len(r["act_var"]) == 4 and len(r["param_var"]) == 5
    assert all(k in ref[-1] for k in SPIKE_KEYS) and ref[-1]["spikes"] > 0
    assert "spike_score" not in ref[0] and ref[-1]["spike_score"] == pytest.approx(ref[-1]["spikes"] / 28)

    real = Trainer._batch

    def batch(self, s, m):
        if (s, m) == (13, 0):  # step 14: steps 13 and 14 are recorded but not yet scanned
            os.kill(os.getpid(), signal.SIGINT)
        return real(self, s, m)

    monkeypatch.setattr(Trainer, "_batch", batch)
    run = tmp_path / "run"
    assert run_training(resolve(None, None, "pre", sets), run, quiet=True)["steps"] == 13
    monkeypatch.setattr(Trainer, "_batch", real)
    assert run_training(None, run, resume=True, quiet=True)["status"] == "completed"
    assert read_jsonl(run / "diagnostics.jsonl") == ref

    steps, labels, m = diag_matrices(ref, n_layer=3)["act_var"]
    html = build_report(tmp_path / "ref").read_text()
    assert {"growth_act_var", "heat_act_var", "heat_grad_var", "diag_spike_score"} <= set(
        re.findall(r'<figure id="fig-([^"]+)"', html))
    from normlab.report import figures as F

    fig = F.layer_growth(m, steps, labels, "Var(x_l)", "t")
    lines = fig.axes[0].get_lines()
    assert lines[0].get_ydata().tolist() == pytest.approx(ref[0]["act_var"])
    assert lines[-1].get_ydata().tolist() == pytest.approx(ref[-1]["act_var"])
