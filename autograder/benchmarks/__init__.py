"""Speed benchmarks of the reference solutions (instructor side, trusted): `make bench LAB=lab07`.

Each lab with speed targets has a module `autograder/benchmarks/labNN.py` with `main(argv) -> int` that prints
its ratios (measured in one run against a baseline, interleaved, medians).
"""
