"""``normlab export RUN DIR``: a lab model as a Hugging Face checkpoint (GPT-2, Llama, Mistral, Qwen3, OLMo-2/3,
Gemma 2/3)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="write a lab model as a Hugging Face checkpoint (GPT-2, Llama, Mistral, Qwen3, OLMo-2/3, "
                       "Gemma 2/3)",
                       description="Writes DIR/config.json, model.safetensors and the tokenizer files, "
                       "loadable with transformers' AutoModelForCausalLM / AutoTokenizer.from_pretrained(DIR). "
                       "Only models a transformers class computes exactly are exported (pre + LayerNorm: "
                       "GPT-2; pre + RMSNorm + RoPE + SwiGLU: Llama, Mistral with a sliding window, Qwen3 with per-head "
                       "QK-norm; post_branch + QK-norm: OLMo-2, OLMo-3 with sliding-window layers; sandwich + "
                       "rmsnorm_1p + GeGLU: Gemma 2, Gemma 3 with QK-norm); others "
                       "are refused with the reason. The written files are loaded back and their logits "
                       "checked against the lab model before DIR appears (docs/inspect.md).")
    p.add_argument("run", metavar="RUN", help="run directory (its best checkpoint), checkpoint or model directory")
    p.add_argument("dir", metavar="DIR", help="output directory (must not exist)")
    p.add_argument("--checkpoint", choices=("best", "latest"), default="best",
                   help="which checkpoint of a run directory (default best: lowest validation loss)")
    p.set_defaults(func=_export)


def _export(args: argparse.Namespace) -> int:
    from normlab.core.fscheck import writable_dir
    from normlab.inspect.export import export_model

    writable_dir(args.dir, "DIR")
    done = export_model(args.run, args.dir, checkpoint=args.checkpoint)
    print(f"{done.path}: {done.hf_class}; max |logit diff| {done.max_logit_diff:.1e} vs the lab model "
          f"on {done.tokens} tokens")
    return 0
