"""Diagnostics: statistics at initialisation (probe), during training and after it.

Modules: ``stats`` (the statistics as pure functions), ``probe`` (``normlab probe``),
``fits`` (depth fits over probe rows), ``training`` (``TrainingDiagnostics``),
``analyze`` (``normlab analyze RUN``), ``sensitivity`` (Wortsman et al.'s LR sensitivity).
Nothing heavy is imported here.
"""
