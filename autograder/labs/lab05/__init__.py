# IPT-CANARY lab05 __init__.py: hidden grading text, never shown to learners
