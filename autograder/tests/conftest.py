"""The suite's own settings."""

collect_ignore = ["toylab"]  # the toy lab's graders run inside the grading engine, not as tests of the suite
