"""Inside PyTorch's grading engine: hidden graders, confinement, results, self-tests."""
