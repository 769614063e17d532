"""Memory and time of `normlab inspect` on a 1B-shape Llama in bfloat16 (random weights).

    nice -n 19 python benchmarks/inspect_1b.py [--max-tokens 512] [--context 512] [--threads 2]

The model has Llama-3.2-1B's shape (d=2048, 16 layers, 32 query / 8 key-value heads, FFN
8192, vocabulary 128256, tied head: 1.24 B parameters), built from a config with random
weights and saved with save_pretrained beside a small BPE tokenizer trained on Tiny
Shakespeare (ids stay below the vocabulary). The inspection runs in a child process;
its peak resident memory (ru_maxrss from wait4) and wall time are printed as JSON. Building
and saving happen in another child, so they do not count.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import json_arg, target, write_targets  # noqa: E402

BUILD = r"""
import sys, torch, transformers as t, tokenizers as tk
out = sys.argv[1]
cfg = t.LlamaConfig(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                    num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=2048,
                    rms_norm_eps=1e-5, tie_word_embeddings=True, bos_token_id=0, eos_token_id=1,
                    rope_parameters={"rope_type": "default", "rope_theta": 500000.0})
torch.set_default_dtype(torch.bfloat16)  # build directly in bf16: one copy of the weights
torch.manual_seed(0)
model = t.LlamaForCausalLM(cfg)
print(sum(p.numel() for p in model.parameters()), flush=True)
model.save_pretrained(out)
tok = tk.Tokenizer(tk.models.BPE())
tok.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = tk.decoders.ByteLevel()
tok.train_from_iterator([open(sys.argv[2], encoding="utf-8").read()],
                        tk.trainers.BpeTrainer(vocab_size=4096, special_tokens=["<s>", "</s>"], show_progress=False))
t.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>").save_pretrained(out)
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--keep", metavar="DIR", help="build the model here and keep it (default: a temp dir)")
    json_arg(ap)
    a = ap.parse_args()
    from normlab.data.source import read_corpus_bytes

    _, corpus = read_corpus_bytes("tinyshakespeare", None)
    env = {**os.environ, "OMP_NUM_THREADS": str(a.threads), "MKL_NUM_THREADS": str(a.threads)}
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(a.keep or tmp) / "llama-1b-random"
        t0 = time.perf_counter()
        if not (model_dir / "config.json").is_file():
            built = subprocess.run([sys.executable, "-c", BUILD, str(model_dir), corpus], env=env,
                                   capture_output=True, text=True, check=True)
            params = int(built.stdout.split()[0])
        else:
            params = None
        build_s = time.perf_counter() - t0
        out = Path(tmp) / "inspect"
        cmd = [sys.executable, "-m", "normlab", "inspect", str(model_dir), "--out", str(out),
               "--dtype", "bfloat16", "--context", str(a.context), "--max-tokens", str(a.max_tokens)]
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit(f"inspect failed with status {os.waitstatus_to_exitcode(status)}")
        summary = json.loads((out / "summary.json").read_text())
    row = {"params": params or summary["params"], "dtype": "bfloat16", "tokens": summary["tokens"],
           "context": summary["context"], "threads": a.threads, "build_s": round(build_s, 1),
           "inspect_wall_s": round(wall, 1), "inspect_peak_rss_gib": round(usage.ru_maxrss / 2**20, 2),
           "weights_gib": round(2 * summary["params"] / 2**30, 2), "cpu_user_s": round(usage.ru_utime, 1),
           "within_8gib": usage.ru_maxrss / 2**20 <= 8.0}
    print(json.dumps(row, indent=2))
    write_targets(a.json, [target("1B-shape Llama bf16 inspect, peak RSS", f"{row['inspect_peak_rss_gib']} GiB "
                                  f"in {row['inspect_wall_s']} s", "<= 8 GiB", row["within_8gib"])])


if __name__ == "__main__":
    main()
