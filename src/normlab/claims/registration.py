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

import hashlib
import json
import logging
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from normlab.claims import measuring_code
from normlab.claims.claim import rule_spec_hash
from normlab.claims.decision import decision_code_hash
from normlab.claims.registration_doc import (  # the document's side, re-exported for its readers
    FORMAT,
    NOT_RULE,
    VERSION,
    build,
    choose,
    claim_entry,
    designs,
    document,
    document_hash,
    dumps,
    part_hash,
    require_designs,
    shifted,
    study_ids,
    study_spec,
    write,
)
from normlab.core.errors import UserError

log = logging.getLogger(__name__)


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

    def descriptive(self) -> set[str]:
        """The parts ("claim/part") registered as descriptive: measured, with no verdict."""
        return {f"{cid}/{p['id']}" for cid, e in self.doc["claims"].items() for p in e["parts"] if p.get("descriptive")}

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


__all__ = ["FORMAT", "NOT_RULE", "VERSION", "Registration", "build", "changes", "choose", "claim_entry", "designs",
           "document", "document_hash", "dumps", "load", "part_hash", "require_designs", "require_match", "shifted",
           "study_ids", "study_spec", "write"]
