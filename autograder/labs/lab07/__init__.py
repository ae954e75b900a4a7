"""Hidden graders of lab07 (a fusing torch.compile backend). Never released."""

# IPT-CANARY lab07 __init__.py: hidden grading text, never shown to learners
