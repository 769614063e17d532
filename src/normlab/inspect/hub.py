"""Where a Hugging Face model comes from: a local directory, the local cache, or the Hub; and
the revisions of one Hub repository as a checkpoint series (``hub_series``, local cache only).

Offline, transformers retries a Hub id for tens of seconds before it fails with a message
about the network. ``hub_source`` decides up front, in at most a few seconds, and fails in
one line that says how to use a local directory instead.
"""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from normlab.core.errors import UserError
from normlab.model.io import HF_CONFIG, is_hf_dir

LOCAL_DIR_HINT = ("or give a local directory holding config.json, the weights (model.safetensors or "
                  "pytorch_model.bin) and the tokenizer files (tokenizer.json, or vocab.json + merges.txt; "
                  "tokenizer_config.json), as save_pretrained writes them (docs/inspect.md)")
CONNECT_TIMEOUT_S = 3.0


def _offline() -> bool:
    from huggingface_hub import constants

    flags = (os.environ.get(v, "").strip().lower() for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))
    return bool(constants.HF_HUB_OFFLINE) or any(f in ("1", "true", "yes", "on") for f in flags)


def _reachable() -> tuple[bool, str]:
    from huggingface_hub import constants

    url = urlparse(constants.ENDPOINT)
    host, port = url.hostname or "huggingface.co", url.port or (80 if url.scheme == "http" else 443)
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as e:
        return False, f"{host} unreachable: {type(e).__name__}"
    return True, host


def hub_source(model: str) -> dict[str, Any]:
    """``from_pretrained`` keyword arguments for MODEL; a UserError when it cannot be had.

    A directory is read as it is. A Hub id in the local cache is read from the cache when the
    Hub cannot be reached (``local_files_only``); one not cached needs the Hub.
    """
    if Path(model).is_dir():
        return {}
    from huggingface_hub import try_to_load_from_cache

    try:
        cached = isinstance(try_to_load_from_cache(model, HF_CONFIG), str)
    except ValueError:  # not a valid repo id: from_pretrained says why, without the network
        return {}
    if _offline():
        if cached:
            return {"local_files_only": True}
        raise UserError(f"{model}: not in the local Hugging Face cache and HF_HUB_OFFLINE is set; "
                        f"download it once with network, {LOCAL_DIR_HINT}")
    ok, why = _reachable()
    if ok:
        return {}
    if cached:
        return {"local_files_only": True}
    raise UserError(f"{model}: not in the local Hugging Face cache and the Hub is unreachable ({why}); "
                    f"download it once with network, {LOCAL_DIR_HINT}")


# ------------------------------------------------------------------ a series of Hub revisions
HUB_PREFIX = "hf:"  # --series hf:REPO@REV,REV,...: revisions of one Hub repository, from the local cache
_STEP = re.compile(r"step[-_]?(\d+)", re.IGNORECASE)  # step1000, stage1-step1000-tokens4B, step-1000


def is_hub_series(src: str) -> bool:
    return src.startswith(HUB_PREFIX)


def hub_series_name(src: str) -> str:
    """The repository's name (``pythia-70m`` of ``hf:EleutherAI/pythia-70m@...``)."""
    return src[len(HUB_PREFIX):].partition("@")[0].rstrip("/").rpartition("/")[2]


def hub_series(src: str) -> list[tuple[int, Path, str]]:
    """(step, snapshot folder, ``REPO@REV``) for each revision of ``hf:REPO@REV,REV,...``, read
    from the local Hugging Face cache only (``snapshot_download(local_files_only=True)``: never
    the network, so HF_HUB_OFFLINE holds whatever it says). A revision's step is the number of
    a ``step<N>`` in its name; when no revision has one, its place in the list (from 0). Every
    missing revision is named in one UserError with the command that downloads it."""
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    repo, _, listed = src[len(HUB_PREFIX):].partition("@")
    revisions = [r.strip() for r in listed.split(",") if r.strip()]
    if not repo or not revisions:
        cached = cached_revisions(repo) if repo else []
        raise UserError(f"--series {src}: name the repository and its revisions, hf:REPO@REV,REV,... (e.g. "
                        "hf:EleutherAI/pythia-70m@step1000,step2000)"
                        + (f"; cached here: {', '.join(cached[:8])}{', ...' if len(cached) > 8 else ''}"
                           if cached else ""))
    twice = sorted({r for r in revisions if revisions.count(r) > 1})
    if twice:
        raise UserError(f"--series {src}: revision {', '.join(twice)} is listed twice; list each once")
    found: dict[str, Path] = {}
    for rev in revisions:
        try:
            path = Path(snapshot_download(repo, revision=rev, cache_dir=constants.HF_HUB_CACHE, local_files_only=True))
        except LocalEntryNotFoundError:  # not cached, or cached in part (IncompleteSnapshotError)
            continue
        except ValueError:  # HFValidationError: checked before any file is looked at
            raise UserError(f"--series {src}: {repo!r} is not a Hub repository id; write hf:ORG/NAME@REV,REV") from None
        if is_hf_dir(path):  # else a download stopped before config.json: as good as missing
            found[rev] = path
    missing = [r for r in revisions if r not in found]
    if missing:
        raise UserError(_missing_line(src, repo, missing))
    steps = [_step_of(r) for r in revisions]
    named = [r for r, s in zip(revisions, steps) if s is not None]
    if not named:
        steps = list(range(len(revisions)))
    elif len(named) < len(revisions):
        unnamed = [r for r, s in zip(revisions, steps) if s is None]
        raise UserError(f"--series {src}: {', '.join(unnamed)} has no step<N> in its name but {named[0]} has; "
                        "give revisions that all name their step (e.g. Pythia's step143000, not main) or none")
    return [(s if s is not None else 0, found[r], f"{repo}@{r}") for r, s in zip(revisions, steps)]


def _step_of(revision: str) -> int | None:
    found = _STEP.findall(revision)
    return int(found[-1]) if found else None


def _missing_line(src: str, repo: str, missing: list[str]) -> str:
    from huggingface_hub import constants

    get = (f"hf download {repo} --revision {missing[0]}" if len(missing) == 1 else
           f"for r in {' '.join(missing)}; do hf download {repo} --revision $r; done")
    where = " where the Hub is reachable (HF_HUB_OFFLINE is set here)" if _offline() else ""
    return (f"--series {src}: revision{'s' if len(missing) > 1 else ''} {', '.join(missing)} of {repo} not in the "
            f"local Hugging Face cache ({constants.HF_HUB_CACHE}); download {'them' if len(missing) > 1 else 'it'}"
            f"{where} with: {get}")


def cached_revisions(repo: str) -> list[str]:
    """The refs (branches, tags) of REPO in the local cache, in step order (``scan_cache_dir``)."""
    from huggingface_hub import constants, scan_cache_dir
    from huggingface_hub.errors import CacheNotFound

    try:
        info = scan_cache_dir(constants.HF_HUB_CACHE)
    except CacheNotFound:
        return []
    refs = {ref for r in info.repos if r.repo_id == repo and r.repo_type == "model" for rev in r.revisions
            for ref in rev.refs}
    return sorted(refs, key=lambda r: (_step_of(r) is None, _step_of(r) or 0, r))
