# IPT-CANARY lab10 __init__.py: hidden grading text, never shown to learners
