"""Hidden graders of lab06 (torch.fx). Never released."""

# IPT-CANARY lab06 __init__.py: hidden grading text, never shown to learners
