"""Hidden graders of lab03 (extending autograd). Never released."""

# IPT-CANARY lab03 __init__.py: hidden grading text, never shown to learners
