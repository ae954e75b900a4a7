
# IPT-CANARY lab02 __init__.py: hidden grading text, never shown to learners
