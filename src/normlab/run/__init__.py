"""One training run, as configuration and as files: RunConfig and its sections' configs, the
one resolution of a command line into a config, run presets, and the run directory's owner
(RunDir) with its checkpoints. Training, studies, reports and inspection all read and write a
run through this package."""
