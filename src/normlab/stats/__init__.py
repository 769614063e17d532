"""Statistics: effects with intervals over seeds and the tests behind verdicts (effects), exact
rate intervals (exact), and the per-tensor measures the diagnostics are built from (tensors)."""
