# IPT-CANARY lab11 __init__.py: hidden grading text, never shown to learners
