"""Every built-in run preset (``normlab train --preset``), one line each.

The only module that fills ``presets.PRESETS``; the registry imports it at its first lookup.
"""

from __future__ import annotations

from normlab.run import presets

presets.PRESETS.add("smoke", presets.smoke)
presets.PRESETS.add("nanogpt-cpu", presets.nanogpt_cpu)
presets.PRESETS.add("baby-gpt", presets.baby_gpt)
presets.PRESETS.add("seed-pet-project", presets.seed_pet_project)
