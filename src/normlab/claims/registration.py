"""Pre-registration: the claims' rules written to a file and committed before the data.

``normlab claims register --scale cpu --out FILE`` writes :func:`build`'s document: for every
chosen claim its statement, experiment, rule hash and the studies it reads; for every part the
rule spec, rule text, parameters, reason (``why``) and a part hash; for every study the hash of
the ``spec.json`` its store is created with and of its trial ids; the measuring code (the
source hash of every module that computes a claim's quantities, ``claims/measuring_code.py``:
``measuring_code.modules`` and ``.sets``, and per claim its set and combined hash); and a hash
of the whole document. Nothing in it depends on the clock: the commit that adds the file is
what dates it.

``normlab claims --registration FILE`` then :func:`load` s the file (its commit and commit time
from git: the file must be committed and unmodified), refuses before any training when the
current rules, studies or measuring code differ from the registered ones (:func:`require_match`),
and after the decisions :func:`normlab.claims.registered.mark` s every part "before-data",
"post-hoc" or "not-registered". How to verify a registration by hand: docs/theory.md, "Pre-registration".
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from normlab.claims import measuring_code
from normlab.claims.claim import CLAIMS, rule_spec_hash
from normlab.claims.decision import decision_code_hash
from normlab.core.errors import UserError
from normlab.core.fsutil import atomic_write_text
from normlab.study.presets import SCALES, study_preset

# 2: seeds per study, quick seeds, scoping, decision code; 3: measuring code (a file of 1 or 2 still
# loads: its parts are marked registered without measuring code)
FORMAT, VERSION = "normlab-claims-registration", 3
log = logging.getLogger(__name__)


# A registered part's keys that are not its rule: its hash, and its design analysis (recorded
# beside the rule, not hashed into it: the rule hash is the claim's as the run computes it).
NOT_RULE = ("part_hash", "design")


def _sha(text: str | bytes, n: int = 16) -> str:
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()[:n]


def part_hash(spec: dict[str, Any]) -> str:
    """Hash of one part's spec (``Part.spec``: id, asserts, quantity, rule, rule text, why)."""
    return _sha(json.dumps(spec, sort_keys=True))


def study_spec(name: str, scale: str, seeds: list[int] | None = None, stages: list[int] | None = None) -> Any:
    """Study preset ``name`` at ``scale``, with ``seeds`` instead of the preset's (a registration's),
    and the nested horizons ``stages`` its claims settle over (they supersede the preset's
    extend_stalled_to: ``claims/settling.py``)."""
    spec = study_preset(name, scale)
    if seeds is not None:
        spec = dataclasses.replace(spec, seeds=list(seeds))
    return spec if not stages else dataclasses.replace(spec, stages=list(stages), extend_stalled_to=None)


def shifted(seeds: list[int], first: int | None) -> list[int]:
    """As many seeds as ``seeds`` from ``first`` on (None: ``seeds`` themselves)."""
    return list(seeds) if first is None else [first + i for i in range(len(seeds))]


def study_ids(name: str, scale: str, seeds: list[int] | None = None, stages: list[int] | None = None) -> dict[str, Any]:
    """What identifies study ``name`` at ``scale`` (with ``seeds``, else the preset's): ``spec_hash``,
    the first 16 hex digits of sha256 of the STORE/spec.json a store of it is created with
    (``sha256sum STORE/spec.json``), ``trials_hash`` over its sorted trial ids (each id hashes a
    trial's whole resolved config, so a changed default shows up too), its ``seeds``, and its
    ``stages`` when it has some (a staged study's spec.json names them, so its spec hash does too)."""

    spec = study_spec(name, scale, seeds, stages)
    ids = sorted(t.id for t in spec.trials())
    got = {"spec_hash": _sha(json.dumps(spec.to_json_data(), indent=2, sort_keys=True)),
           "trials_hash": _sha("\n".join(ids)), "trials": len(ids), "seeds": list(spec.seeds)}
    if stages:
        got["stages"] = list(stages)
    return got


def claim_entry(c: Any, scale: str, found: dict[str, Any] | None = None) -> dict[str, Any]:
    """One claim as registered (the rule hash at the scale the claim is decided at: None for a
    quick claim, as ``Claim.decide`` uses it), with each part's design analysis (``found``, else
    :func:`designs`; {} where only the hashes are wanted: the designs simulate)."""
    s = None if c.quick else scale
    found = designs(c, scale) if found is None else found
    return {"statement": c.statement, "source": c.source, "experiment": c.experiment_at(s), "quick": c.quick,
            "studies": list(c.studies), "rule_hash": c.rule_hash(s), "scoping_hash": c.scoping_hash(),
            "parts": [{**p.spec(), "part_hash": part_hash(p.spec()),
                       "design": found[p.id].record() if p.id in found else None} for p in c.parts],
            "measuring_code": {"hash": measuring_code.measuring_hash(c), "set": measuring_code.set_name(c)}}


def designs(c: Any, scale: str) -> dict[str, Any]:
    """{part id: Design} of ``c`` at ``scale``: its declared ``Claim.design``; for a training claim
    that declares none, the design from the lab's seen data (``claims/design_seen.py``: the parts
    with a seen prior at this scale); else {}."""
    if c.design is not None:
        return dict(c.design(c, scale))
    if c.quick:
        return {}
    from normlab.claims.design_seen import seen_design

    return seen_design(c, scale)


def require_designs(chosen: list[Any], scale: str, every: bool = False,
                    found: dict[str, dict[str, Any]] | None = None) -> None:
    """Refuse, before anything is written, a registration with a part that cannot decide whatever
    the data (its design's one line: the part, the plan, the best it could reach and the fix).
    A declared design refuses always; one from seen data (an automatic exploratory estimate) only
    with ``every``, which also refuses a part with no design at all (a quick claim that declares
    none, a training part with neither a declared design nor a seen prior): a campaign's
    registration. ``found``: {claim id: designs} already computed."""
    got = found if found is not None else {c.id: designs(c, scale) for c in chosen}
    undecidable = [d.text() for c in chosen for d in got[c.id].values()
                   if not d.decidable and (every or c.design is not None)]
    if undecidable:
        more = f" (and {len(undecidable) - 1} more part(s) that cannot decide)" if len(undecidable) > 1 else ""
        raise UserError(f"{undecidable[0]}{more}; redesign it or register it without the part")
    if every:
        missing = [c.id for c in chosen if c.quick and c.design is None]
        missing += [f"{c.id}/{p.id}" for c in chosen if not c.quick for p in c.parts
                    if not p.check and p.id not in got[c.id]]
        if missing:
            raise UserError(f"--require-designs: {', '.join(missing)} declare no design analysis (Claim.design) and "
                            "have no seen-data prior (claims/design_seen.py); declare one or register without "
                            "--require-designs")


def document_hash(doc: dict[str, Any]) -> str:
    return _sha(json.dumps({k: v for k, v in doc.items() if k != "document_hash"}, sort_keys=True))


def choose(scale: str, only: list[str] | None = None, quick: bool = False) -> list[Any]:
    """The claims a registration (or a run) with these options covers; UserError as the run gives."""

    chosen = [CLAIMS.get(i, "--only") for i in only] if only else [c for _, c in CLAIMS.items()]
    chosen = [c for c in chosen if c.quick or not quick]
    if scale not in SCALES:
        lacking = [c.id for c in chosen if scale not in c.experiments]
        have = sorted(i for i, c in CLAIMS.items() if scale in c.experiments)
        if lacking:
            raise UserError(f"--scale={scale}: only claims {', '.join(have) or '(none)'} have this scale; "
                            "name them with --only")
    return chosen


def build(scale: str, only: list[str] | None = None, quick: bool = False, first_seed: int | None = None,
          quick_seeds: int = 5, every_design: bool = False, stages: dict[str, list[int]] | None = None,
          tolerances: dict[str, float] | None = None) -> dict[str, Any]:
    """The registration document of the claims ``normlab claims`` with these options decides;
    ``first_seed``: every study's seeds and the ``quick_seeds`` seeds of the quick measurements
    start there (unseen seeds for a confirmatory run), else the presets' seeds and 0, 1, ...;
    ``stages`` and ``tolerances``: the settling rule (:func:`document`)."""
    return document(choose(scale, only, quick), scale, first_seed, quick_seeds, every_design, stages, tolerances)


def document(chosen: list[Any], scale: str, first_seed: int | None = None, quick_seeds: int = 5,
             every_design: bool = False, stages: dict[str, list[int]] | None = None,
             tolerances: dict[str, float] | None = None) -> dict[str, Any]:
    """The registration document of the claims ``chosen`` at ``scale`` (seeds as :func:`build`);
    refused first when a part cannot decide (:func:`require_designs`). ``stages`` (study ->
    horizons) and ``tolerances`` ("claim/part" or "claim" -> effect tolerance) register the
    settling rule of the staged studies' parts (``claims/settling.py``)."""
    found = {c.id: designs(c, scale) for c in chosen}
    require_designs(chosen, scale, every_design, found)
    names = sorted({n for c in chosen if not c.quick for n in c.studies})
    stages = {n: list(v) for n, v in (stages or {}).items()}
    stray = sorted(set(stages) - set(names))
    if stray:
        raise UserError(f"stages: {', '.join(stray)} is not a study of the chosen claims ({', '.join(names) or 'none'})")
    doc: dict[str, Any] = {"format": FORMAT, "version": VERSION, "scale": scale,
                           "claims": {c.id: claim_entry(c, scale, found[c.id]) for c in chosen},
                           "studies": {n: study_ids(n, scale, shifted(study_preset(n, scale).seeds, first_seed),
                                                    stages.get(n)) for n in names},
                           "decision_code": decision_code_hash(), "measuring_code": measuring_code.section(chosen)}
    if tolerances:
        ids = {c.id for c in chosen} | {f"{c.id}/{p.id}" for c in chosen for p in c.parts}
        unknown = sorted(set(tolerances) - ids)
        if unknown:
            raise UserError(f"tolerances: {unknown[0]} names no chosen claim or part (write CLAIM or CLAIM/PART)")
        doc["tolerances"] = {k: float(v) for k, v in sorted(tolerances.items())}
    if any(c.quick for c in chosen):
        doc["quick_seeds"] = shifted(list(range(quick_seeds)), first_seed)
    doc["document_hash"] = document_hash(doc)
    return doc


def dumps(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def write(path: str | Path, doc: dict[str, Any], force: bool = False) -> bool:
    """Write ``doc`` to ``path`` atomically; False when the file already holds exactly it. A file
    holding something else is refused unless ``force`` (a committed registration is evidence)."""

    path = Path(path)
    text = dumps(doc)
    if path.exists():
        try:
            old = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise UserError(f"{path}: cannot read the file there ({e}); choose another --out") from None
        if old == text:
            return False
        if not force:
            raise UserError(f"{path}: holds a different registration; pass --force to replace it (the old "
                            "one stays in git history), or choose another --out")
    atomic_write_text(path, text)
    return True


@dataclass
class Registration:
    """A registration file as a run reads it: the document, where it is, and its commit."""

    doc: dict[str, Any]
    path: Path
    sha256: str
    file: str = ""                    # path inside its repository (as `git show COMMIT:FILE` takes it)
    commit: str | None = None
    committed_at: int | None = None   # the commit's committer time, seconds since the epoch
    unverified: str = ""              # why there is no commit (no git, not in a repository)
    changed: dict[str, str] = field(default_factory=dict)  # claim id -> what changed since registration

    def seeds(self, study: str) -> list[int] | None:
        """The seeds registered for ``study`` (None: a format-1 file, whose spec hash fixes the preset's)."""
        got = (self.doc.get("studies", {}).get(study) or {}).get("seeds")
        return None if got is None else [int(s) for s in got]

    def stages(self, study: str) -> list[int] | None:
        """The registered nested horizons of ``study`` (None: not staged)."""
        got = (self.doc.get("studies", {}).get(study) or {}).get("stages")
        return None if got is None else [int(s) for s in got]

    def tolerances(self) -> dict[str, float]:
        """The registered settling tolerances ("claim/part" or "claim" -> effect tolerance)."""
        return {str(k): float(v) for k, v in (self.doc.get("tolerances") or {}).items()}

    def quick_seeds(self) -> list[int] | None:
        """The seeds registered for the quick measurements (None: not named, the run's --seeds from 0)."""
        got = self.doc.get("quick_seeds")
        return None if got is None else [int(s) for s in got]

    def meta(self) -> dict[str, Any] | None:
        """claims.json's ``meta.registration`` (None when no commit dates the file)."""
        if self.commit is None:
            return None
        return {"file": self.file, "sha256": self.sha256, "commit": self.commit, "committed_at": self.committed_at,
                "document_hash": self.doc.get("document_hash"), "scale": self.doc.get("scale"),
                "version": self.doc.get("version")}


def load(path: str | Path) -> Registration:
    """Read and check a registration file, and find its commit with git. A damaged or hand-edited
    document, or a file git has uncommitted changes for, is a UserError; without git (or outside
    a repository) the registration is kept but unverified, and every part is then not-registered."""

    path = Path(path)
    try:
        raw = path.read_bytes()
        doc = json.loads(raw.decode("utf-8"))
        ok = isinstance(doc, dict) and doc.get("format") == FORMAT and isinstance(doc.get("claims"), dict)
    except FileNotFoundError:
        raise UserError(f"--registration {path}: no such file; write one with `normlab claims register "
                        f"--out {path}` and commit it") from None
    except (OSError, ValueError) as e:
        raise UserError(f"--registration {path}: not a registration file ({e})") from None
    if not ok:
        raise UserError(f"--registration {path}: not a registration file written by `normlab claims register`")
    bad = [i for i, e in doc["claims"].items()
           if rule_spec_hash(e["statement"], e["experiment"],
                             [{k: v for k, v in p.items() if k not in NOT_RULE} for p in e["parts"]]) != e["rule_hash"]
           or ("measuring_code" in e and measuring_code.combined(measuring_code.registered(doc, e) or {})
               != e["measuring_code"].get("hash"))]
    if bad or document_hash(doc) != doc.get("document_hash"):
        raise UserError(f"--registration {path}: its hashes do not match its text (edited by hand"
                        f"{': claims ' + ', '.join(bad) if bad else ''}); register again with `normlab claims register`")
    reg = Registration(doc, path, hashlib.sha256(raw).hexdigest())
    _date(reg, raw)
    return reg


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, timeout=30)


def _date(reg: Registration, raw: bytes) -> None:
    """Fill in the commit that last wrote the file and its commit time (``git log -1``)."""
    where = reg.path.resolve().parent
    try:
        top = _git(where, "rev-parse", "--show-toplevel")
    except (OSError, subprocess.SubprocessError) as e:
        reg.unverified = f"git is not available ({e.__class__.__name__}), so no commit dates {reg.path}"
        log.warning("--registration %s: %s; every part is marked not-registered", reg.path, reg.unverified)
        return
    if top.returncode != 0:
        reg.unverified = f"{reg.path} is not in a git repository, so no commit dates it"
        log.warning("--registration %s: %s; every part is marked not-registered", reg.path, reg.unverified)
        return
    root = Path(top.stdout.decode().strip())
    reg.file = reg.path.resolve().relative_to(root.resolve()).as_posix()
    fix = f"commit it first (git add {reg.path} && git commit), or run without --registration"
    if _git(root, "status", "--porcelain", "--", reg.file).stdout.strip():
        raise UserError(f"--registration {reg.path}: not committed, or changed since its commit; {fix}")
    got = _git(root, "log", "-1", "--format=%H %ct", "--", reg.file).stdout.decode().split()
    if len(got) != 2:
        raise UserError(f"--registration {reg.path}: no commit holds it; {fix}")
    shown = _git(root, "show", f"{got[0]}:{reg.file}")
    if shown.returncode != 0 or hashlib.sha256(shown.stdout).hexdigest() != hashlib.sha256(raw).hexdigest():
        raise UserError(f"--registration {reg.path}: its content differs from commit {got[0][:7]}; {fix}")
    reg.commit, reg.committed_at = got[0], int(got[1])


def changes(reg: Registration, chosen: list[Any], scale: str) -> dict[str, str]:
    """What differs between the registration and the chosen claims now: claim id -> reason (a
    rule, a study, the claim's scoping or the decision code; a format-1 registration recorded
    neither scoping nor decision code, so those count as changed), and, joined to any of these,
    the measuring code (a registration of format 1 or 2 recorded none: not a change)."""
    entries = reg.doc["claims"]
    out: dict[str, str] = {}
    study_now: dict[str, dict[str, Any]] = {}
    code = reg.doc.get("decision_code")
    for c in chosen:
        e = entries.get(c.id)
        if e is None:
            out[c.id] = "not in the registration"
            continue
        now = claim_entry(c, scale, {})  # its hashes only
        if now["rule_hash"] != e["rule_hash"]:
            was = {p["id"]: p["part_hash"] for p in e["parts"]}
            parts = [p["id"] for p in now["parts"] if was.get(p["id"]) != p["part_hash"]]
            out[c.id] = f"rule of parts {', '.join(parts)} changed" if parts else "statement or experiment changed"
            continue
        for n in c.studies if not c.quick else ():
            if n not in study_now:
                study_now[n] = study_ids(n, scale, reg.seeds(n), reg.stages(n))
            was_study = reg.doc.get("studies", {}).get(n) or {}
            if not was_study or any(study_now[n].get(k) != v for k, v in was_study.items()):
                out[c.id] = f"study {n} changed"
                break
        else:
            if e.get("scoping_hash") != now["scoping_hash"]:
                out[c.id] = "scoping (regime factors or the scoping rule) changed" if "scoping_hash" in e \
                    else "scoping not registered (registration format 1)"
            elif code != decision_code_hash():
                out[c.id] = "decision code changed" if code else "decision code not registered (registration format 1)"
    for c in chosen:  # the measuring code, whatever else changed
        moved = measuring_code.change(reg.doc, entries[c.id], c) if c.id in entries else ""
        if moved:
            out[c.id] = f"{out[c.id]}, and {moved}" if c.id in out else moved
    return out


def require_match(reg: Registration, chosen: list[Any], scale: str, quick: bool, allow_post_hoc: bool) -> None:
    """Before any training: the registration's scale and rules must be the ones this run uses,
    else one line naming the changed claims and the fixes (``allow_post_hoc``: decide them
    anyway, marked post-hoc with the registered rule's verdict beside)."""
    if not quick and any(not c.quick for c in chosen) and reg.doc.get("scale") != scale:
        raise UserError(f"--registration {reg.path}: registered for --scale {reg.doc.get('scale')}, this run is "
                        f"--scale {scale}; register this scale (`normlab claims register --scale {scale} --out FILE`)")
    reg.changed = changes(reg, chosen, scale)
    if reg.changed and not allow_post_hoc:
        alike: dict[str, list[str]] = {}  # claims with the same reason (a helper every claim imports) named once
        for i, why in reg.changed.items():
            alike.setdefault(why, []).append(i)
        said = "; ".join(f"{', '.join(ids)}: {why}" for why, ids in alike.items())
        at = f"the registered commit {reg.commit[:7]}" if reg.commit else "the revision it was registered at"
        code = f"run from {at}, " if any(measuring_code.CHANGED in why for why in alike) else ""
        raise UserError(f"--registration {reg.path}: differs from the current claims ({said}); {code}register again "
                        "and commit (`normlab claims register --force`), run without --registration (marked not "
                        "pre-registered), or pass --allow-post-hoc (these claims marked post-hoc)")
