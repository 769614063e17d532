"""`normlab claims --only ID` measures only what ID declares it needs; finished claims are cached
in OUT/cache, so an interrupted run resumes without measuring them again, and a cached run
writes the effects an uncached one writes; `claims` prints progress lines when piped."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from normlab.claims.claim import CLAIMS

SMALL = {"seeds": 3, "depths": [2, 4, 8], "d_model": 32}


def _count_models(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every model the probe grid really probes, as (placement, L)."""
    import normlab.diagnostics.probe as probe

    seen: list[tuple[str, int]] = []
    real = probe.probe_model

    def counted(model, *a, **kw):
        seen.append((model.cfg.placement, len(model.blocks)))
        return real(model, *a, **kw)

    monkeypatch.setattr(probe, "probe_model", counted)
    return seen


def _effects(out: Path) -> list[tuple[str, str, dict]]:
    data = json.loads((out / "claims.json").read_text())
    return [(r["id"], p["id"], p["effect"]) for r in data["claims"] for p in r["parts"]]


def test_each_quick_claim_reads_only_what_it_declares(monkeypatch: pytest.MonkeyPatch) -> None:
    """Deciding a claim on just its declared cells and extras gives the record it gets on the
    whole grid: a claim reading anything undeclared would get NaN or a KeyError instead."""
    import normlab.claims.measure as m
    from normlab.diagnostics.measurements import EXTRAS, measure_extras

    monkeypatch.setattr(m, "REF_DEPTH", 4)  # so that 'ref' (4) and 'max' (8) are different depths
    full = m.measure(**SMALL)
    full.extra = measure_extras(full.seeds, full.depths, full.ref_depth())
    quick = [c for _, c in CLAIMS.items() if c.quick]
    assert quick and all(c.needs is not None and set(c.needs.extra) <= set(EXTRAS) for c in quick)
    for c in quick:
        cells = set(c.needs.cells(full.depths, full.ref_depth()))
        part = m.QuickData([r for r in full.rows if (r["placement"], r["n_layer"]) in cells], full.seeds, full.probe)
        for key in c.needs.extra:
            name, _, p = key.partition(":")
            if p:
                head = {k: v for k, v in full.extra[name].items() if k in ("L", "depths")}
                part.extra.setdefault(name, head)[p] = full.extra[name][p]
            else:
                part.extra[name] = full.extra[name]
        assert json.dumps(c.decide(part), default=float) == json.dumps(c.decide(full), default=float), c.id


def test_only_one_quick_claim_probes_only_its_cells(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import normlab.diagnostics.measurements as more
    from normlab.cli import main

    seen = _count_models(monkeypatch)
    monkeypatch.setattr(more, "measure_extra", lambda *a, **kw: pytest.fail("an extra measurement ran"))
    assert main(["claims", "--quick", "--only", "normformer-pre-early", "--out", str(tmp_path), "--quiet"]) == 0
    assert seen == [("pre", 16)] * 5  # Pre-LN at L = 16, 5 seeds: not the 75 models of the grid
    assert [r["id"] for r in json.loads((tmp_path / "claims.json").read_text())["claims"]] == ["normformer-pre-early"]


def test_interrupted_run_resumes_from_the_cache_with_the_uncached_results(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import normlab.diagnostics.measurements as more
    from normlab.claims import run_claims

    only = ["normformer-pre-early", "seed001-rms"]
    real_rms = more.rms_formula

    def interrupted(seed: int, *a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(more, "rms_formula", interrupted)
    with pytest.raises(KeyboardInterrupt):  # Ctrl-C while measuring the second claim
        run_claims(out=tmp_path / "a", only=only, **SMALL)
    assert not (tmp_path / "a" / "claims.json").exists()
    rms_calls: list[int] = []
    monkeypatch.setattr(more, "rms_formula", lambda seed, *a, **kw: rms_calls.append(seed) or real_rms(seed, *a, **kw))
    seen = _count_models(monkeypatch)
    run_claims(out=tmp_path / "a", only=only, **SMALL)
    assert seen == [] and rms_calls == [0, 1, 2]  # the first claim came from the cache; only rms was measured
    meta = json.loads((tmp_path / "a" / "claims.json").read_text())["meta"]
    assert meta["cached_claims"] == ["normformer-pre-early"]
    run_claims(out=tmp_path / "a", only=only, **SMALL)
    assert seen == [] and rms_calls == [0, 1, 2]  # all cached now: nothing measured at all
    run_claims(out=tmp_path / "b", only=only, cache=False, **SMALL)
    assert len(seen) == 3 * 1 and not (tmp_path / "b" / "cache").exists()
    assert _effects(tmp_path / "a") == _effects(tmp_path / "b")


def test_a_damaged_or_stale_cache_entry_is_measured_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from normlab.claims import run_claims

    run_claims(out=tmp_path, only=["normformer-pre-early"], **SMALL)
    entry = tmp_path / "cache" / "claims" / "normformer-pre-early.json"
    cell = tmp_path / "cache" / "probe" / "pre-L8.json"
    assert entry.is_file() and cell.is_file()
    entry.write_text("{not json")
    seen = _count_models(monkeypatch)
    run_claims(out=tmp_path, only=["normformer-pre-early"], **SMALL)
    assert seen == []  # the claim is decided again, from its cached probe cell
    run_claims(out=tmp_path, only=["normformer-pre-early"], **{**SMALL, "seeds": 4})
    assert seen == [("pre", 8)] * 4  # other seeds: another key, measured again


def test_claims_prints_progress_lines_when_piped(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "normlab", "claims", "--quick", "--only", "seed001-rms", "--out", str(tmp_path)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.startswith("claims: ")]
    assert lines[0].startswith("claims: quick claims: 0/1 found in ") and "5 models" in lines[0], lines
    assert lines[-1].startswith("claims: done 5/5 models in "), lines
    assert "\r" not in r.stderr
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert "claims: quick claims: 1/1 found in " in again.stderr and "nothing to measure" in again.stderr
