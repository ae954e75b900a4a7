
# IPT-CANARY lab01 __init__.py: hidden grading text, never shown to learners
