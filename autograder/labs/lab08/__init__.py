# IPT-CANARY lab08 __init__.py: hidden grading text, never shown to learners
