"""Hidden graders of lab04 (the dispatcher). Never released."""

# IPT-CANARY lab04 __init__.py: hidden grading text, never shown to learners
