"""Where a Hugging Face model comes from: a local directory, the local cache, or the Hub.

Offline, transformers retries a Hub id for tens of seconds before it fails with a message
about the network. ``hub_source`` decides up front, in at most a few seconds, and fails in
one line that says how to use a local directory instead.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from normlab.core.errors import UserError
from normlab.model.io import HF_CONFIG

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
