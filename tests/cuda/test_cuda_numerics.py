"""Every placement, forward and backward on the device in float32 and under bfloat16
autocast, against the same weights in float64 on the CPU.

Errors are norm-wise relative, ||device - ref|| / ||ref||, over the logits, the loss and the
concatenated parameter gradients. Stated tolerances:

    float32:   logits and loss 1e-5, gradients 1e-4   (CPU float32 measures 1e-7 to 4e-7;
               TF32 matmuls, 10-bit mantissa, would show as ~1e-3 and fail)
    bfloat16:  logits and loss 2e-2, gradients 5e-2   (CPU autocast measures 2e-3 to 7e-3:
               bfloat16 keeps 8 significant bits, 2e-3 per rounding)

A wrong kernel, scale or missing term shows up as an error of order 1.
"""

from __future__ import annotations

import contextlib
import copy

import pytest
import torch

from normlab import ModelConfig, TransformerLM
from normlab.model.catalogue import PLACEMENTS

pytestmark = pytest.mark.cuda

TOL = {"float32": {"fwd": 1e-5, "grad": 1e-4}, "bfloat16": {"fwd": 2e-2, "grad": 5e-2}}


def _rel(got: torch.Tensor, ref: torch.Tensor) -> float:
    got, ref = got.detach().double().cpu(), ref.detach().double().cpu()
    return float((got - ref).norm() / ref.norm().clamp_min(1e-30))


def _fwd_bwd(model: TransformerLM, idx: torch.Tensor, tgt: torch.Tensor, dtype: str) -> tuple:
    amp = (torch.autocast(idx.device.type, dtype=torch.bfloat16) if dtype == "bfloat16"
           else contextlib.nullcontext())
    with amp:
        logits, loss = model(idx, tgt)
    loss.backward()
    grads = torch.cat([p.grad.reshape(-1).double() for p in model.parameters() if p.grad is not None])
    return logits.float(), loss.float(), grads


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("placement", PLACEMENTS.names())
def test_placement_matches_cpu_float64(placement: str, dtype: str, device: torch.device) -> None:
    torch.manual_seed(0)
    base = TransformerLM(ModelConfig(vocab_size=65, context=32, n_layer=2, d_model=64, n_head=4,
                                     placement=placement, dropout=0.0))
    gen = torch.Generator().manual_seed(1)
    idx = torch.randint(0, 65, (4, 32), generator=gen)
    tgt = torch.randint(0, 65, (4, 32), generator=gen)
    ref = _fwd_bwd(copy.deepcopy(base).double(), idx, tgt, "float64")
    got = _fwd_bwd(copy.deepcopy(base).to(device), idx.to(device), tgt.to(device), dtype)
    assert got[2].numel() == ref[2].numel(), "a parameter got no gradient on the device only"
    errs = {"logits": _rel(got[0], ref[0]), "loss": _rel(got[1], ref[1]), "grads": _rel(got[2], ref[2])}
    tol = TOL[dtype]
    limits = {"logits": tol["fwd"], "loss": tol["fwd"], "grads": tol["grad"]}
    bad = {k: f"{v:.1e} > {limits[k]:.0e}" for k, v in errs.items() if not v <= limits[k]}
    assert not bad, f"{placement} {dtype} on {device.type} vs CPU float64: {bad}"
