"""Every built-in benchmark size and peer (``normlab bench --sizes``, ``--peers``), one line each.

The only module that fills ``peers.SIZES`` and ``peers.PEERS``; each registry imports it at its
first lookup.
"""

from __future__ import annotations

from normlab.bench import peers
from normlab.bench.peers import Size

peers.SIZES.add("tiny", Size(4, 128, 4, 64, 12))     # nanoGPT's CPU recipe
peers.SIZES.add("baby", Size(6, 384, 6, 256, 8))     # nanoGPT's shakespeare_char, smaller batch
peers.SIZES.add("deep", Size(24, 128, 4, 128, 16))   # many small layers: per-op overhead dominates

peers.PEERS.add("normlab", peers.normlab)
peers.PEERS.add("normlab-fused", peers.normlab_fused)
peers.PEERS.add("normlab-compiled", peers.normlab_compiled)
peers.PEERS.add("hand-pre", peers.hand_pre)
peers.PEERS.add("xt-pre", peers.xt_pre)
peers.PEERS.add("xt-sandwich", peers.xt_sandwich)
peers.PEERS.add("hf-gpt2", peers.hf_gpt2)
