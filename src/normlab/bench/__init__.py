"""Performance measurement: train-step throughput against peers, matmul peak, trial batching.

``normlab bench`` (src/normlab/cli/bench_cmd.py) and the scripts in ``benchmarks/`` use it;
the method and the measured numbers are in docs/performance.md.
"""
