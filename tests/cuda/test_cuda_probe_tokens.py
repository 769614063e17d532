"""The probe on the device equals the probe on the CPU; an out-of-range token id on the
device is the one-line ``UserError``, not a device-side assert."""

from __future__ import annotations

import copy
import os
import subprocess
import sys

import pytest
import torch

from normlab import ModelConfig, TransformerLM
from normlab.diagnostics.probe import probe_model

pytestmark = pytest.mark.cuda

RTOL, ATOL = 1e-3, 1e-6  # float32 on both sides; only the kernels' summation order differs


@pytest.mark.parametrize("placement", ["post", "pre", "resi_dual"])
def test_probe_on_device_equals_cpu(placement: str, device: torch.device) -> None:
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(vocab_size=65, context=32, n_layer=4, d_model=64, n_head=4,
                                      placement=placement, init="xavier", dropout=0.0))
    gen = torch.Generator().manual_seed(3)
    idx, tgt = torch.randint(0, 65, (8, 32), generator=gen), torch.randint(0, 65, (8, 32), generator=gen)
    # The Jacobian projections come from a CPU generator on both sides, so they are equal.
    want = probe_model(copy.deepcopy(model), idx, tgt, 2, torch.Generator().manual_seed(0))
    got = probe_model(copy.deepcopy(model).to(device), idx.to(device), tgt.to(device), 2,
                      torch.Generator().manual_seed(0))
    assert [r[:4] for r in got] == [r[:4] for r in want]
    bad = [f"{r[:4]}: {r[4]:.6g} vs {w[4]:.6g}" for r, w in zip(got, want)
           if not abs(r[4] - w[4]) <= RTOL * abs(w[4]) + ATOL]
    assert not bad, f"{len(bad)} of {len(want)} probe values differ on {device.type}: " + "; ".join(bad[:5])


CHILD = """
import sys, torch
from normlab import ModelConfig, TransformerLM
from normlab.core.errors import UserError
dev = torch.device(sys.argv[1])
model = TransformerLM(ModelConfig(vocab_size=13, context=8, n_layer=1, d_model=16, n_head=2)).to(dev)
for bad in (13, -1):
    idx = torch.zeros(2, 8, dtype=torch.long, device=dev)
    idx[1, 3] = bad
    try:
        model(idx)
        print("no error for id", bad)
    except UserError as e:
        print(e)
out, _ = model(torch.zeros(2, 8, dtype=torch.long, device=dev))  # the device is still usable
if dev.type == "cuda":
    torch.cuda.synchronize()
print("ok", tuple(out.shape))
"""


def test_out_of_range_token_is_one_line_error(device: torch.device) -> None:
    # A child process: a device-side assert would poison this process's CUDA context.
    proc = subprocess.run([sys.executable, "-c", CHILD, str(device)], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert lines == ["idx: token ids must be in [0, model.vocab_size=13), got range [0, 13]",
                     "idx: token ids must be in [0, model.vocab_size=13), got range [-1, 0]",
                     "ok (2, 8, 13)"], proc.stdout + proc.stderr[-2000:]
