# IPT-CANARY lab09 __init__.py: hidden grading text, never shown to learners
