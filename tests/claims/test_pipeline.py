"""The claims run as its pieces: options checked when made (each error names its option), the
registry of claims filled once by its catalogue from the claims the catalogue's modules
define (no list to keep beside them), and the four steps in the order the run takes them."""

from __future__ import annotations

import json
import re
import types
from pathlib import Path

import pytest

from normlab.claims import ClaimsRun, catalogue
from normlab.claims.claim import CLAIMS, Part, claim
from normlab.claims.rules import Direction
from normlab.core.errors import UserError


@pytest.mark.parametrize(("options", "message"), [
    ({"seeds": 2}, r"^--seeds=2: need at least 3 seeds"),
    ({"scale": "huge"}, r"^--scale=huge: choose one of smoke, cpu, gpu, seed$"),
    ({"only": ["no-such-claim"]}, r"^--only"),
])
def test_a_wrong_option_names_itself(options: dict, message: str, tmp_path: Path) -> None:
    with pytest.raises(UserError, match=message):
        ClaimsRun(out=tmp_path / "out", **options)
    assert not (tmp_path / "out").exists()


def test_an_unknown_claim_lists_the_valid_ones() -> None:
    with pytest.raises(UserError) as e:
        ClaimsRun(only=["xiong-thm"])
    assert "xiong-thm1" in str(e.value) and "seed002-pet-project" in str(e.value)


def test_the_registry_is_every_claim_the_catalogue_modules_define() -> None:
    """Each ``@claim`` in a catalogue module is registered under its id, in the order written,
    and nothing else is: a claim is added by defining it."""
    written = []
    for mod in catalogue.MODULES:
        source = Path(mod.__file__).read_text(encoding="utf-8")
        written += re.findall(r'^@claim\(id="([^"]+)"', source, flags=re.M)
    assert CLAIMS.names() == written and len(written) >= 27
    assert all(c.id == name for name, c in CLAIMS.items())
    assert CLAIMS.names()[: sum(c.quick for _, c in CLAIMS.items())] == [i for i, c in CLAIMS.items() if c.quick]


def test_defined_takes_a_modules_own_claims_not_those_it_imports() -> None:
    mod = types.ModuleType("normlab_test_claims")

    def measure(data: object) -> dict:  # (never called)
        return {}

    measure.__module__ = mod.__name__
    own = claim(id="own", statement="s", source="t", experiment="e", quick=True,
                parts=[Part("a", "asserts", "quantity", Direction(+1), "why")])(measure)
    mod.own, mod.borrowed, mod.text = own, CLAIMS.get("xiong-thm1"), "not a claim"
    assert catalogue.defined(mod) == [own]


def test_the_run_is_plan_decide_quick_train_decide_publish(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The orchestrator's order, with each step stubbed: quick claims need no training, so they
    are decided before the studies are trained; the records come back in the claims' order."""
    import normlab.claims.decide as decide_mod
    import normlab.claims.plan as plan_mod
    import normlab.claims.publish as publish_mod
    import normlab.claims.train as train_mod
    from normlab.claims import run_claims

    seen: list[str] = []
    ids = ["seed002-pet-project", "xiong-thm1"]
    run = ClaimsRun(quick=False, only=ids, scale="smoke", out=tmp_path)

    class P:
        registration, mode = None, "exploratory"
        claims = [CLAIMS.get(i) for i in ids]
        quick_claims = [c for c in claims if c.quick]
        training_claims = [c for c in claims if not c.quick]

        def close(self) -> None:
            seen.append("close")

    monkeypatch.setattr(plan_mod, "plan", lambda run: seen.append(f"plan {run.scale}") or P())
    monkeypatch.setattr(decide_mod, "decide", lambda p, cs: seen.append("decide " + ",".join(c.id for c in cs))
                        or {c.id: {"id": c.id} for c in cs})
    monkeypatch.setattr(train_mod, "train", lambda p: seen.append("train"))
    monkeypatch.setattr(publish_mod, "publish", lambda p, records, started, launch: seen.append(
        "publish " + ",".join(r["id"] for r in records)))
    P.run = run
    got = run_claims(run)
    assert [r["id"] for r in got] == ids
    assert seen == ["plan smoke", "decide xiong-thm1", "train", "decide seed002-pet-project", "close",
                    "publish seed002-pet-project,xiong-thm1"]
    # after the plan, before anything is measured: the launch line; after the outputs: its end
    lines = [json.loads(x) for x in (tmp_path / "history.jsonl").read_text().splitlines()]
    assert [(h["kind"], h.get("claims") or h.get("status")) for h in lines] == [("launch", ids), ("end", "completed")]
