"""``normlab data prepare SRC --out DIR``: a corpus of any size as memory-mapped token shards."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("data", help="prepare corpora bigger than memory as token shards",
                       description="Corpora for training (docs/training.md, 'Corpora bigger than memory').")
    cmds = p.add_subparsers(dest="data_command", metavar="ACTION", required=True)
    q = cmds.add_parser("prepare", help="stream SRC through a tokenizer into token shards with a manifest",
                        description="Streams SRC (a text file, a folder of text files, a known corpus such as "
                        "tinyshakespeare, or hf:NAME_OR_PATH, a Hugging Face dataset read from disk or the "
                        "user's cache, never downloaded) through the tokenizer into DIR/tokens-NNNNN.bin "
                        "(uint16 or uint32 ids) with DIR/manifest.json; memory stays flat however large SRC "
                        "is. Train on it with --set data.corpus=DIR (and data.tokenizer naming the same "
                        "tokenizer). DIR appears only when complete.")
    q.add_argument("src", metavar="SRC", help="text file, folder, known corpus name, or hf:NAME_OR_PATH")
    q.add_argument("--out", required=True, metavar="DIR", help="output folder (must not exist, or be empty)")
    q.add_argument("--tokenizer", default="char", metavar="NAME",
                   help="char (vocabulary from a first pass over SRC), byte, bpe (byte-level BPE trained on "
                   "a sample of SRC; extra 'bpe'), or the path of a tokenizer.json (default char)")
    q.add_argument("--bpe-vocab", type=int, default=512, metavar="N", help="BPE vocabulary size (default 512)")
    q.add_argument("--sample-mb", type=float, default=8.0, metavar="MB",
                   help="size of the BPE training sample, spread over SRC (default 8)")
    q.add_argument("--shard-tokens", type=int, default=1 << 27, metavar="N",
                   help="tokens per shard file (default 134217728)")
    q.add_argument("--glob", default="**/*.txt", help="files of a folder SRC, in sorted order (default **/*.txt)")
    q.add_argument("--hf-config", default=None, metavar="NAME", help="dataset configuration (hf: sources)")
    q.add_argument("--split", default="train", help="dataset split (hf: sources; default train)")
    q.add_argument("--column", default="text", help="column holding the text (hf: sources; default text)")
    q.add_argument("--quiet", action="store_true", help="no progress display")
    q.set_defaults(func=_prepare)


def _check(args: argparse.Namespace) -> None:
    """Every argument checked before SRC is read."""
    from pathlib import Path

    from normlab.core.errors import UserError
    from normlab.core.fscheck import writable_dir

    writable_dir(args.out, "--out")
    if args.tokenizer.endswith(".json"):
        if not Path(args.tokenizer).is_file():
            raise UserError(f"--tokenizer {args.tokenizer}: no such file; give the path of a tokenizer.json")
    else:
        from normlab.data.tokenizers import TOKENIZERS

        names = [n for n in TOKENIZERS.names() if n != "pretrained"]
        if args.tokenizer not in names:
            raise UserError(f"--tokenizer {args.tokenizer!r}: use one of {', '.join(names)} "
                            "or the path of a tokenizer.json")
    if args.bpe_vocab < 257 or args.bpe_vocab > 1 << 20:
        raise UserError(f"--bpe-vocab {args.bpe_vocab}: must be in [257, 1048576] (bytes plus merges)")
    if args.sample_mb <= 0:
        raise UserError(f"--sample-mb {args.sample_mb}: must be > 0, e.g. 8")
    if args.shard_tokens < 1:
        raise UserError(f"--shard-tokens {args.shard_tokens}: must be >= 1, e.g. 134217728")


def _prepare(args: argparse.Namespace) -> int:
    from normlab.core.progress import Progress
    from normlab.data.prepare import open_source, prepare_shards

    _check(args)
    source = open_source(args.src, glob=args.glob, hf_config=args.hf_config, split=args.split,
                         column=args.column)
    display = Progress("data prepare", enabled=not args.quiet)
    try:
        m = prepare_shards(source, args.out, args.tokenizer, bpe_vocab=args.bpe_vocab,
                           sample_bytes=int(args.sample_mb * (1 << 20)), shard_tokens=args.shard_tokens,
                           progress=display)
    finally:
        display.close()
    tok = m["tokenizer"]
    print(f"{args.out}: {m['tokens']} tokens ({m['dtype']}) in {len(m['shards'])} shards from {m['text_bytes']} "
          f"bytes of text (sha256 {m['sha256'][:12]}...); tokenizer {tok['name']}, {tok['vocab_size']} ids")
    return 0
