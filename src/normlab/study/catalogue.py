"""Every built-in study preset, trial kind and executor, one line each.

The only module that fills ``presets.STUDY_PRESETS``, ``trials.TRIALS`` and
``executors.EXECUTORS``; each registry imports it at its first lookup.
"""

from __future__ import annotations

from normlab.study import (
    bracket_preset,
    demo_preset,
    executors,
    frontier_preset,
    long_preset,
    map_preset,
    new_methods_preset,
    presets,
    seed_presets,
    transfer_preset,
    trials,
    width_map_preset,
)

executors.EXECUTORS.add("local", executors.LOCAL)
executors.EXECUTORS.add("ray", executors.RAY)
executors.EXECUTORS.add("slurm", executors.SLURM)

presets.STUDY_PRESETS.add("pre-vs-post", presets.pre_vs_post)
presets.STUDY_PRESETS.add("pre-vs-post-demo", demo_preset.pre_vs_post_demo)
presets.STUDY_PRESETS.add("xiong-warmup", presets.xiong_warmup)
presets.STUDY_PRESETS.add("init-gradients", presets.init_gradients)
presets.STUDY_PRESETS.add("lr-sensitivity", presets.lr_sensitivity)
presets.STUDY_PRESETS.add("zloss", presets.zloss)
presets.STUDY_PRESETS.add("depth", presets.depth)
presets.STUDY_PRESETS.add("deep-stability", presets.deep_stability)
presets.STUDY_PRESETS.add("collapse", presets.collapse)
presets.STUDY_PRESETS.add("stability-map", map_preset.stability_map)
presets.STUDY_PRESETS.add("recipe-variants", map_preset.recipe_variants)
presets.STUDY_PRESETS.add("stability-frontier", frontier_preset.stability_frontier)
presets.STUDY_PRESETS.add("frontier-ends", frontier_preset.frontier_ends)
presets.STUDY_PRESETS.add("frontier-bracket", bracket_preset.frontier_bracket)
presets.STUDY_PRESETS.add("frontier-bracket-post6", bracket_preset.frontier_bracket_post6)
presets.STUDY_PRESETS.add("shallow-long", long_preset.shallow_long)
presets.STUDY_PRESETS.add("new-methods", new_methods_preset.new_methods)
presets.STUDY_PRESETS.add("pre-dropout", seed_presets.pre_dropout)
presets.STUDY_PRESETS.add("deep-pre", seed_presets.deep_pre)
presets.STUDY_PRESETS.add("norm-vs-none", seed_presets.norm_vs_none)
presets.STUDY_PRESETS.add("attention-focus", seed_presets.attention_focus)
presets.STUDY_PRESETS.add("transfer-width-sp", transfer_preset.transfer_width_sp)
presets.STUDY_PRESETS.add("transfer-width-mup", transfer_preset.transfer_width_mup)
presets.STUDY_PRESETS.add("transfer-depth", transfer_preset.transfer_depth)
presets.STUDY_PRESETS.add("transfer-muon", transfer_preset.transfer_muon)
presets.STUDY_PRESETS.add("transfer-sharpness", transfer_preset.transfer_sharpness)
presets.STUDY_PRESETS.add("transfer-entropy", transfer_preset.transfer_entropy)
presets.STUDY_PRESETS.add("stability-map-width", width_map_preset.stability_map_width)

trials.TRIALS.add("train", trials.train)
trials.TRIALS.add("probe", trials.probe)
