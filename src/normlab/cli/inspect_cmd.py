"""``normlab inspect MODEL`` (a real or lab model under the lab's statistics; ``--series SRC``
for one model's checkpoints over training, ``normlab.inspect.series``) and
``normlab import MODEL DIR`` (a transformers checkpoint as a TransformerLM model directory)."""

from __future__ import annotations

import argparse
import logging


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("inspect", help="family, placement and per-layer statistics of a Hugging Face or lab model",
                       description="MODEL is a Hugging Face model id (downloaded by transformers), a "
                       "save_pretrained directory, a normlab run directory or a checkpoint / model "
                       "directory. Prints the family and its placement in the lab's terms, then measures "
                       "on text tokenised with the model's own tokenizer and writes OUT/probe.csv, "
                       "summary.json, probe_config.json and OUT/analysis/ (render with `normlab report OUT`).")
    p.add_argument("model", metavar="MODEL", nargs="?", help="Hugging Face id, save_pretrained directory, "
                   "normlab run, checkpoint or model directory (docs/inspect.md)")
    p.add_argument("--series", metavar="SRC", action="append", help="instead of MODEL: a checkpoint series, "
                   "measured step by step (resumable) with a page of each per-layer statistic against step; SRC "
                   "is a run trained with train.keep_checkpoints, a directory of step checkpoints (lab or "
                   "Hugging Face), one checkpoint, or hf:REPO@REV,REV,... (revisions of one Hub repository, read "
                   "from the local Hugging Face cache only, e.g. hf:EleutherAI/pythia-70m@step1000,step2000); "
                   "repeat to add more")
    p.add_argument("--text", metavar="FILE", help="UTF-8 text to measure on, or 'tinyshakespeare' (its last "
                   "10%%); default: a lab run's own validation split, any other model Tiny Shakespeare's")
    p.add_argument("--out", metavar="DIR", help="output directory (default ./inspect/<model name>; a series: "
                   "./inspect/<name>-over-training)")
    p.add_argument("--context", type=int, help="tokens per sequence (default: 512 for HF models, capped by "
                   "the model; the training context for lab models)")
    p.add_argument("--max-tokens", type=int, default=2048, help="tokens in the batch (default 2048)")
    p.add_argument("--dtype", default="float32", help="float32, bfloat16 or float16 (default float32)")
    p.add_argument("--device", default="cpu", help="torch device (default cpu)")
    p.add_argument("--seed", type=int, default=0, help="seed of the masked-LM positions and of --measure's random "
                   "tangents (default 0)")
    p.add_argument("--data-dir", metavar="DIR", help="directory holding tinyshakespeare.txt, or the folder a lab "
                   "run's corpus file was moved to")
    p.add_argument("--force", action="store_true", help="write into a non-empty --out (a series: measure "
                   "every step again)")
    p.add_argument("--measure", action="store_true", help="also the sub-layer measurements of a lab model, per "
                   "block: identity coefficient (any placement), LayerNorm gain and identity path (Post-LN), "
                   "branch share (DeepNorm); printed and in OUT/analysis/analysis.json (docs/inspect.md)")
    p.add_argument("--sharpness-iters", type=int, default=0, metavar="N", help="also the sharpness, the top Hessian "
                   "eigenvalue of the loss on the batch, by N power iterations (default 0 = skip; each iteration "
                   "costs about two backward passes)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_inspect)

    p = sub.add_parser("import", help="convert a Hugging Face GPT-2, Llama, Mistral, Qwen3, OLMo-2/3 or Gemma 2/3 into a "
                       "normlab model dir",
                       description="Writes DIR/model.safetensors and model_config.json (a TransformerLM "
                       "whose logits equal transformers' forward) plus the tokenizer, for "
                       "`normlab train --init-from DIR` and `normlab inspect DIR`.")
    p.add_argument("model", metavar="MODEL", help="Hugging Face model id or save_pretrained directory")
    p.add_argument("dir", metavar="DIR", help="output directory (must not exist)")
    p.add_argument("--context", type=int, help="maximum sequence length of the imported model "
                   "(default: the checkpoint's max_position_embeddings)")
    p.set_defaults(func=_import)


def _inspect(args: argparse.Namespace) -> int:
    from pathlib import Path

    from normlab.core.errors import UserError
    from normlab.core.fscheck import writable_dir
    from normlab.inspect import inspect_model

    if (args.model is None) == (args.series is None):
        raise UserError("give MODEL or --series SRC (one or more), not " + ("both" if args.model else "neither"))
    if args.series:
        if args.measure or args.sharpness_iters:
            raise UserError(f"{'--measure' if args.measure else '--sharpness-iters'} applies to one MODEL, not to a --series")
        return _series(args)
    out = writable_dir(Path(args.out) if args.out else Path("inspect") / Path(args.model.rstrip("/")).name,
                       "--out")
    s = inspect_model(args.model, out, args.text, context=args.context, max_tokens=args.max_tokens,
                      dtype=args.dtype, device=args.device, seed=args.seed, data_dir=args.data_dir,
                      quiet=args.quiet, force=args.force, measure=args.measure, sharpness_iters=args.sharpness_iters)
    r = s["result"]
    print(f"family {s['family']}; placement {s['placement']}; norm {s['norm']}"
          + (f"; {s['notes']}" if s["notes"] else "")
          + ("" if s["importable"] else "; inspect-only"))
    print(f"loss {s['loss']:.4f} nats/token on {s['tokens']} tokens of {s['text']}, mean log Z {s['log_z']:.3f}"
          + (f", sharpness {r['sharpness']:.4g} ({args.sharpness_iters} power iterations)" if "sharpness" in r else ""))
    print(f"{'layer':>5} {'rms':>9} {'cos':>7} {'angle':>7} {'delete+':>9} {'grad':>10} {'max_logit':>9}")
    for li in range(1, len(r["cos"]) + 1):
        print(f"{li:>5} {r['rms'][li]:>9.3g} {r['cos'][li - 1]:>7.4f} {r['angular_distance'][li - 1][li]:>7.4f} "
              f"{r['deletion_loss'][li - 1] - r['loss']:>+9.4f} {r['grad_norm_block'][li - 1]:>10.3g} "
              f"{r['attn_max_logit'][li - 1]:>9.3g}")
    if args.measure:
        _print_measurements(r["measurements"], r["not_measured"])
    logging.getLogger(__name__).info(f"wrote {out}/probe.csv, summary.json, probe_config.json, analysis/ "
                                     f"in {s['wall_time_s']:.1f} s")
    return 0


def _print_measurements(got: dict[str, list], skipped: dict[str, str]) -> None:
    """The sub-layer measurements, a row per block and a column per measurement and sub-layer:
    ``identity`` (the block's identity coefficient), ``ratio.attn`` and ``gain.attn`` (the
    norm after the attention: RMS(F)/RMS(x) and its gain on F), ``path.ffn``, ``share.ffn``."""
    short = {"identity_path": "path", "branch_share": "share"}
    columns: list[tuple[str, list[float]]] = []
    for name, per in got.items():
        if name == "identity_coefficients":
            columns.append(("identity", per))
        elif name == "norm_gain":
            for sub in per[0]:
                columns += [(f"ratio.{sub}", [b[sub]["ratio"] for b in per]), (f"gain.{sub}", [b[sub]["gain"] for b in per])]
        else:
            columns += [(f"{short[name]}.{sub}", [b[sub] for b in per]) for sub in per[0]]
    print(f"{'block':>5} " + " ".join(f"{c:>10}" for c, _ in columns))
    for i in range(len(columns[0][1])):
        print(f"{i + 1:>5} " + " ".join(f"{v[i]:>10.4g}" for _, v in columns))
    for name, why in skipped.items():
        print(f"not measured: {name} ({why})")


def _series(args: argparse.Namespace) -> int:
    from pathlib import Path

    from normlab.core.fscheck import writable_dir
    from normlab.inspect.series import default_out, inspect_series

    out = writable_dir(Path(args.out) if args.out else default_out(args.series), "--out")
    got = inspect_series(args.series, out, args.text, context=args.context, max_tokens=args.max_tokens,
                         dtype=args.dtype, device=args.device, seed=args.seed, data_dir=args.data_dir,
                         quiet=args.quiet, force=args.force)
    steps = got["steps"]
    logging.getLogger(__name__).info(f"{len(steps)} checkpoints (steps {steps[0]}..{steps[-1]}), "
                                     f"{len(got['measured'])} measured now; rows in {out}/series.csv")
    print(got["page"])
    return 0


def _import(args: argparse.Namespace) -> int:
    from normlab.core.fscheck import writable_dir
    from normlab.inspect.convert import import_model

    writable_dir(args.dir, "DIR")
    path = import_model(args.model, args.dir, context=args.context)
    print(path)
    return 0
