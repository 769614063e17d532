"""Trial batching: K runs that share an architecture trained as one batched computation.

Each trial keeps its own weights, seed (init and data), learning rate, warm-up, schedule,
AdamW state, clipping, z-loss, divergence status and run directory. Their parameters are
stacked along a new leading dimension (K, ...) and the model is evaluated with
``torch.func.vmap`` over that dimension, so one batched matmul replaces K small ones and
the per-op overhead that bounds tiny models on CPU is paid once instead of K times.

The arithmetic per trial is the solo loop's (``normlab.train.loop.Trainer``): same init
(``torch.manual_seed(seed)`` then ``TransformerLM``), same batches (``train_batch``), the
same AdamW update as ``torch.optim.AdamW`` (single-tensor path, decay on matrices only,
``optim.param_groups``), the same global-norm clipping rule as ``clip_grad_norm_``, and
the same log/eval/checkpoint cadence and run-directory files. Loss curves agree with solo
runs to float32 rounding (tests/bench/test_batched.py).

Limits (``incompatibility`` names the first one met, ``run_batched`` refuses with it):
  * dropout must be 0: random masks inside vmap cannot reproduce a solo run's masks;
  * placements with per-step weight hooks (nGPT's ``after_step``) are refused;
  * train.diag_every must be 0 (diagnostic hooks see one model, not a stack);
  * the model, data and train sections must be equal (only train.diverge_loss may differ);
  * a killed batched run is not resumed as a batch: each trial resumes alone from its own
    solo-format checkpoint (``run_training(..., resume=True)``, what the study runner does);
  * train.compile is ignored: the vmapped step runs eagerly.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import time
import warnings
from pathlib import Path
from typing import Any

import torch

from normlab.config import RunConfig
from normlab.errors import UserError
from normlab.schema import to_dict


def incompatibility(cfgs: list[RunConfig]) -> str | None:
    """Why ``cfgs`` cannot be trained as one batch, or None when they can."""
    from normlab.model.build import resolve_model
    from normlab.model.placement import Placement, Stream

    if not cfgs:
        return "no trials given"
    first = cfgs[0]
    model, data = to_dict(first.model), to_dict(first.data)
    train = {k: v for k, v in to_dict(first.train).items() if k != "diverge_loss"}
    for i, c in enumerate(cfgs[1:], 1):
        if to_dict(c.model) != model:
            return f"trial {i}: model section differs from trial 0 (batched trials share an architecture)"
        if to_dict(c.data) != data:
            return f"trial {i}: data section differs from trial 0"
        if {k: v for k, v in to_dict(c.train).items() if k != "diverge_loss"} != train:
            return f"trial {i}: train section differs from trial 0 (only train.diverge_loss may differ)"
    if first.model.dropout > 0:
        return f"model.dropout={first.model.dropout}: dropout masks inside vmap cannot match solo runs; use 0"
    if first.train.diag_every > 0:
        return "train.diag_every > 0: in-training diagnostics need solo runs; set it to 0"
    plan = resolve_model(first.model)
    for sub in {s.name: s for pair in plan.layout for s in pair}.values():
        if sub.cls.after_step is not Placement.after_step or type(plan.stream()).after_step is not Stream.after_step:
            return f"model.placement={sub.name!r} changes weights after each step (e.g. nGPT); run it solo"
    return None


def compatible(cfgs: list[RunConfig]) -> bool:
    """True when ``run_batched(cfgs, ...)`` accepts these configs (the study runner's test)."""
    return incompatibility(cfgs) is None


class _Trial:
    """Host-side bookkeeping of one trial: its config, run directory, loop state and loggers."""

    def __init__(self, cfg: RunConfig, run_dir: Path, model: torch.nn.Module, loggers: list[Any]) -> None:
        from normlab.train.loop import LoopState

        self.cfg, self.run_dir, self.model, self.loggers = cfg, run_dir, model, loggers
        self.st = LoopState()
        self.status, self.diverged_at = "completed", None
        self.summary: dict[str, Any] | None = None


def _stack(trials: list[_Trial], names: list[str], decay: set[str]) -> dict[str, Any]:
    """Stacked leaf parameters (K, ...), zeroed Adam moments, per-trial hyper-parameters."""
    params = {n: torch.stack([dict(t.model.named_parameters())[n].detach() for t in trials]).requires_grad_()
              for n in names}
    o = [t.cfg.optim for t in trials]
    order = [n for n, p in trials[0].model.named_parameters() if p.requires_grad]  # clip_grad_norm_'s order
    return {"params": params, "order": order,
            "m": {n: torch.zeros_like(p) for n, p in params.items()},
            "v": {n: torch.zeros_like(p) for n, p in params.items()}, "decay": decay,
            "wd": [x.weight_decay for x in o], "b1": [x.beta1 for x in o], "b2": [x.beta2 for x in o],
            "eps": [x.eps for x in o], "clip": [x.grad_clip if x.grad_clip > 0 else math.inf for x in o],
            "z": [x.z_loss for x in o]}


@torch.no_grad()
def _clip_and_step(S: dict[str, Any], lrs: list[float], step: int) -> torch.Tensor:
    """Per trial, the solo step's own calls on that trial's slices of the stacked tensors:
    ``clip_grad_norm_``'s foreach norm and scaling (parameters in ``model.parameters()``
    order, as the solo loop passes them), then ``torch._fused_adamw_``, the kernel of the
    solo loop's ``AdamW(fused=True)``, per parameter group. Same kernels, same operand order,
    so the same float32 rounding. Returns the unclipped norms (K,)."""
    ps, order = S["params"], S["order"]
    norms = []
    for i, lr in enumerate(lrs):
        grads = [ps[n].grad[i] for n in order]
        total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads, 2.0)), 2.0)
        torch._foreach_mul_(grads, torch.clamp(S["clip"][i] / (total + 1e-6), max=1.0))
        norms.append(total)
        step_t = torch.tensor(float(step), device=total.device)  # AdamW's state["step"] after its += 1
        for decays in (True, False):
            names = [n for n in ps if (n in S["decay"]) == decays]
            if names:
                torch._fused_adamw_([ps[n][i] for n in names], [ps[n].grad[i] for n in names],
                                    [S["m"][n][i] for n in names], [S["v"][n][i] for n in names], [],
                                    [step_t] * len(names), amsgrad=False, lr=lr, beta1=S["b1"][i],
                                    beta2=S["b2"][i], weight_decay=S["wd"][i] if decays else 0.0,
                                    eps=S["eps"][i], maximize=False)
    for p in ps.values():
        p.grad = None
    return torch.stack(norms)


def _keep(S: dict[str, Any], keep: list[int]) -> None:
    """Drop finished trials from the stack (their compute stops; the rest carry on)."""
    idx = torch.tensor(keep)
    for key in ("params", "m", "v"):
        S[key] = {n: t.detach()[idx].clone().requires_grad_(key == "params") for n, t in S[key].items()}
    for key in ("wd", "b1", "b2", "eps", "clip", "z"):
        S[key] = [S[key][i] for i in keep]


def _finite(v: float) -> float | None:
    return v if math.isfinite(v) else None  # JSON has no NaN/inf; null means "not finite"


@torch.no_grad()
def _export(S: dict[str, Any], i: int, tr: _Trial, step: int) -> torch.optim.Optimizer:
    """Copy slice ``i`` into the trial's own model and a real AdamW holding its moments,
    so its checkpoint is a solo checkpoint (``normlab.train.checkpoint`` format)."""
    from normlab.train.optim import make_optimizer

    named = dict(tr.model.named_parameters())
    for n, p in S["params"].items():
        named[n].copy_(p[i])
    opt = make_optimizer(tr.model, tr.cfg.optim)
    for n, p in named.items():
        opt.state[p] = {"step": torch.tensor(float(step)), "exp_avg": S["m"][n][i].clone(),
                        "exp_avg_sq": S["v"][n][i].clone()}
    return opt


def _save(tr: _Trial, name: str, corpus: Any, opt: torch.optim.Optimizer | None) -> None:
    from normlab.train import checkpoint

    meta = {"loop": vars(tr.st), "tokenizer": corpus.tokenizer.state(), "batched": True}
    checkpoint.save(tr.run_dir / "checkpoints" / name, tr.model, meta, opt)


def _log(tr: _Trial, step: int, tokens_per_step: int, metrics: dict[str, Any]) -> None:
    row = {"tokens": step * tokens_per_step, **metrics}
    for lg in tr.loggers:
        lg.log(row, step)


def _finish(tr: _Trial, wall: float) -> dict[str, Any]:
    from normlab.fsutil import atomic_write_json
    from normlab.train.run import make_summary

    tr.st.wall_time = wall
    tr.summary = make_summary(tr.status, tr.st, tr.diverged_at, tr.cfg, tr.model)
    tr.summary["batched"] = True
    for lg in tr.loggers:
        lg.finish(tr.summary)
        lg.close()
    atomic_write_json(tr.run_dir / "summary.json", tr.summary)
    return tr.summary


def run_batched(cfgs: list[RunConfig], run_dirs: list[Path], quiet: bool = False) -> list[dict]:
    """Train ``cfgs[i]`` into ``run_dirs[i]`` as one batched computation; returns the summaries.

    Each run directory follows the solo contract (config.json, env.json, metrics.jsonl,
    summary.json, checkpoints/latest and best written by ``normlab.train.checkpoint``).
    Raises ``UserError`` naming the reason when ``compatible(cfgs)`` is False.
    """
    from torch.func import vmap

    from normlab.data import load_corpus
    from normlab.data.batches import check_fits, train_batch, val_batches
    from normlab.fsutil import atomic_write_json
    from normlab.model.transformer import TransformerLM
    from normlab.train.env import Dist, environment, pick_device
    from normlab.train.loggers import make_loggers, require_loggers
    from normlab.train.optim import param_groups
    from normlab.train.run import is_run_dir
    from normlab.train.schedules import lr_at

    if len(cfgs) != len(run_dirs):
        raise UserError(f"run_batched: {len(cfgs)} configs but {len(run_dirs)} run directories")
    why = incompatibility(cfgs)
    if why:
        raise UserError(f"cannot batch these trials: {why}")
    run_dirs = [Path(d) for d in run_dirs]
    if len(set(run_dirs)) != len(run_dirs):
        raise UserError("run_batched: two trials share one run directory")
    for d in run_dirs:
        if d.exists() and is_run_dir(d):
            raise UserError(f"{d}: already holds a run; batched trials start fresh")
    c0 = cfgs[0]
    for c in cfgs:
        require_loggers(list(c.train.loggers))
    corpus = load_corpus(c0.data)
    check_fits(len(corpus.train), c0.model.context, "training")
    check_fits(len(corpus.val), c0.model.context, "validation")
    mcfg = dataclasses.replace(c0.model, vocab_size=corpus.vocab_size)
    cfgs = [dataclasses.replace(c, model=mcfg) for c in cfgs]
    t = c0.train
    device = pick_device(t.device)
    if t.threads > 0:
        torch.set_num_threads(t.threads)
    trials = []
    for c, d in zip(cfgs, run_dirs):
        torch.manual_seed(c.seed)  # the solo run's init, bit for bit
        trials.append(_Trial(c, d, TransformerLM(mcfg).to(device), []))
    base = trials[0].model
    groups = param_groups(base, 0.0)
    names = [n for g in groups for n in g["names"]]
    S = _stack(trials, names, set(groups[0]["names"]))
    buffers = {n: torch.stack([dict(tr.model.named_buffers())[n] for tr in trials]) for n, _ in base.named_buffers()}
    val = [(x.to(device), y.to(device)) for x, y in val_batches(corpus.val, mcfg.context, t.batch_size, t.eval_batches)]
    for tr in trials:
        tr.run_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_json(tr.run_dir / "config.json", json.loads(tr.cfg.to_json()))
        env = environment(device, tr.cfg.seed, Dist())
        env["batched"] = {"trials": len(trials), "run_dirs": [str(d) for d in run_dirs]}
        atomic_write_json(tr.run_dir / "env.json", env)
        tr.loggers = make_loggers(list(tr.cfg.train.loggers), tr.run_dir, json.loads(tr.cfg.to_json()))

    z_on = any(c.optim.z_loss > 0 for c in cfgs)

    def loss_one(p: dict, b: dict, x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> tuple:
        # forward's token-range check reads values, which vmap cannot do; the tokens come
        # from the corpus, so check=False. tie_weights keeps the tied head on wte's slice.
        logits = torch.func.functional_call(base, {**p, **b}, (x,), {"check": False}, tie_weights=True)  # (B, T, V)
        ce = torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), y.reshape(-1))
        if not z_on:
            return ce, ce
        log_z = torch.logsumexp(logits.float(), dim=-1).pow(2).mean()   # PaLM z-loss, as the solo loop
        return ce + z * log_z, ce

    autocast = (torch.autocast(device.type, dtype=torch.bfloat16) if t.dtype == "bfloat16" else None)
    # CPU's flash SDPA kernel has no vmap batching rule, so vmap runs it once per trial
    # (the same kernel call a solo run makes, which keeps the curves together); the
    # matmuls around it are batched. Measured under load, the math kernel was not faster.
    warnings.filterwarnings("ignore", message=".*batching rule for aten::_scaled_dot_product")
    def losses(x: torch.Tensor, y: torch.Tensor, z: torch.Tensor, train_dims: bool) -> tuple:
        dims = (0, 0, 0, 0, 0) if train_dims else (0, 0, None, None, 0)
        with autocast or contextlib.nullcontext():
            return vmap(loss_one, in_dims=dims)(S["params"], buffers, x, y, z)

    tokens_per_step = t.batch_size * mcfg.context
    rows = t.batch_size // t.grad_accum
    everyone, t_start = list(trials), time.perf_counter()
    first_bad = [-1] * len(trials)
    loss_acc = torch.zeros(len(trials), device=device)     # (K,) summed step losses since the last log
    loss_n, since_steps, since_time = 0, 0, 0.0
    for s in range(t.steps):
        s1 = s + 1
        t0 = time.perf_counter()
        lrs = [lr_at(tr.cfg.optim.schedule, s, tr.cfg.optim.lr, tr.cfg.optim.warmup_steps, t.steps,
                     tr.cfg.optim.min_lr) for tr in trials]
        z = torch.tensor(S["z"], device=device)
        step_loss = torch.zeros(len(trials), device=device)
        for m in range(t.grad_accum):
            xs, ys = zip(*(train_batch(corpus.train, mcfg.context, rows, tr.cfg.seed, s, m) for tr in trials))
            x, y = torch.stack(xs).to(device), torch.stack(ys).to(device)     # (K, B, T)
            obj, ce = losses(x, y, z, True)
            (obj.sum() / t.grad_accum).backward()   # trials are independent: d(sum)/d(theta_k) = d(obj_k)
            step_loss += ce.detach().float() / t.grad_accum
        gnorm = _clip_and_step(S, lrs, s1)
        loss_acc += step_loss
        limit = torch.tensor([tr.cfg.train.diverge_loss for tr in trials], device=device)
        bad = ~torch.isfinite(step_loss) | (step_loss > limit)
        if bool(bad.any()):  # one host sync per step, as cheap as the solo loop's device-side check
            first_bad = [s1 if b and fb < 0 else fb for b, fb in zip(bad.tolist(), first_bad)]
        loss_n, since_steps = loss_n + 1, since_steps + 1
        since_time += time.perf_counter() - t0
        is_eval = (t.eval_every > 0 and s1 % t.eval_every == 0) or s1 == t.steps
        is_log = s1 % t.log_every == 0 or is_eval
        is_ckpt = (t.checkpoint_every > 0 and s1 % t.checkpoint_every == 0) or s1 == t.steps
        if not (is_log or is_ckpt):
            continue
        vals = None
        if is_log and is_eval:
            with torch.no_grad():
                vals = sum(losses(vx, vy, torch.zeros_like(z), False)[1].float() for vx, vy in val) / len(val)
        done = []
        for i, tr in enumerate(trials):
            tr.st.step, tr.st.loss_n = s1, loss_n
            row: dict[str, Any] = {"train/loss": _finite(float(loss_acc[i]) / loss_n), "lr": lrs[i],
                                   "grad_norm": _finite(float(gnorm[i]))}
            if first_bad[i] >= 0:
                tr.status, tr.diverged_at = "diverged", first_bad[i]
                tr.st.train_time += since_time
                _log(tr, s1, tokens_per_step, {**row, "diverged": True})
                done.append(i)
                continue
            opt = _export(S, i, tr, s1) if (is_ckpt or vals is not None) else None
            if is_log:
                row.update({"time/step_s": since_time / since_steps,
                            "tokens_per_s": tokens_per_step * since_steps / max(since_time, 1e-9)})
                if vals is not None:
                    v = float(vals[i])
                    row["val/loss"], tr.st.last_val = v, v
                    if tr.st.best_val is None or v < tr.st.best_val:
                        tr.st.best_val = v
                        _save(tr, "best", corpus, None)
                tr.st.train_time += since_time
                _log(tr, s1, tokens_per_step, row)
                tr.st.loss_n = 0
            tr.st.loss_sum = 0.0 if is_log else float(loss_acc[i])
            tr.st.wall_time = time.perf_counter() - t_start
            if is_ckpt:
                _save(tr, "latest", corpus, opt)
        if is_log:
            loss_acc.zero_()
            loss_n, since_steps, since_time = 0, 0, 0.0
        for i in done:
            _finish(trials[i], time.perf_counter() - t_start)
        if done:
            keep = [i for i in range(len(trials)) if i not in done]
            if not keep:
                trials = []
                break
            _keep(S, keep)
            trials, first_bad = [trials[i] for i in keep], [first_bad[i] for i in keep]
            loss_acc, buffers = loss_acc[keep], {n: b[keep] for n, b in buffers.items()}
    for tr in trials:
        _finish(tr, time.perf_counter() - t_start)
    return [tr.summary for tr in everyone]
