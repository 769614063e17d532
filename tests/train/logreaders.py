"""Read back what the W&B and TensorBoard loggers wrote, with the packages' own record types.

wandb >= 0.19 dropped its Python reader of the ``.wandb`` transaction log; the file is a
LevelDB-style log (7-byte W&B header, 32 KiB blocks of crc32/length/type records) of
``wandb_internal_pb2.Record`` messages, which the few lines below unframe.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any, Iterator

BLOCK, HEADER = 32768, 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def wandb_records(path: Path) -> Iterator[Any]:
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a W&B transaction log"
    pos, buf = HEADER, b""
    while pos + HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER:  # a block's tail too short for a record header is padding
            pos += left
            continue
        _crc, n, kind = struct.unpack("<IHB", data[pos:pos + HEADER])
        if kind == 0:  # zero-filled rest of the block
            pos += left
            continue
        chunk, pos = data[pos + HEADER:pos + HEADER + n], pos + HEADER + n
        buf = chunk if kind in (FULL, FIRST) else buf + chunk
        if kind in (FULL, LAST):
            rec = pb.Record()
            rec.ParseFromString(buf)
            yield rec


def _item_key(item: Any) -> str:
    return item.key or "/".join(item.nested_key)


def wandb_run(run_dir: Path) -> list[dict[str, Any]]:
    """One dict per W&B session of ``run_dir`` (offline mode): run id, group, config,
    history rows (W&B's own ``_``-keys dropped) and the final summary."""
    import wandb

    # run.finish() can return before W&B's service process has written the log out (seen with
    # the runs on tmpfs and other tests running beside): teardown waits for the service to stop
    wandb.teardown()
    sessions = []
    for f in sorted((run_dir / "wandb").glob("offline-run-*/run-*.wandb")):
        s: dict[str, Any] = {"history": [], "summary": {}, "config": {}}
        for rec in wandb_records(f):
            kind = rec.WhichOneof("record_type")
            if kind == "run":
                s["id"], s["group"] = rec.run.run_id, rec.run.run_group
                s["config"].update({i.key: json.loads(i.value_json) for i in rec.run.config.update})
            elif kind == "config":
                s["config"].update({i.key: json.loads(i.value_json) for i in rec.config.update})
            elif kind == "history":
                row = {_item_key(i): json.loads(i.value_json) for i in rec.history.item}
                s["history"].append({k: v for k, v in row.items() if not k.startswith("_")} | {"step": row["_step"]})
            elif kind == "summary":
                s["summary"].update({_item_key(i): json.loads(i.value_json) for i in rec.summary.update
                                     if _item_key(i)})
        sessions.append(s)
    return sessions


def tensorboard_scalars(logdir: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar tag of the event files under ``logdir``: [(step, value), ...]."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def tensorboard_hparams(logdir: Path) -> tuple[dict[str, Any], list[str]]:
    """(hparam values, metric tags) written through the hparams plugin under ``logdir``."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    acc = EventAccumulator(str(logdir), size_guidance={"tensors": 0})
    acc.Reload()
    values: dict[str, Any] = {}
    metrics: list[str] = []
    for blob in acc.PluginTagToContent("hparams").values():
        data = plugin_data_pb2.HParamsPluginData.FromString(blob)
        if data.HasField("session_start_info"):
            for k, v in data.session_start_info.hparams.items():
                values[k] = getattr(v, v.WhichOneof("kind"))
        if data.HasField("experiment"):
            metrics += [m.name.tag for m in data.experiment.metric_infos]
    return values, metrics
