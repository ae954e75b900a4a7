# ---
# jupyter:
#   inside_pytorch:
#     lab: lab00
#     title: Toy lab for the engine's own tests
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown] nbgrader={"grade": false, "grade_id": "intro", "locked": true, "solution": false, "schema_version": 3}
# # A toy lab

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "setup", "locked": true, "solution": false, "schema_version": 3}
import numpy as np

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "add_impl", "locked": false, "solution": true, "schema_version": 3}
def add(a, b):
    ### BEGIN SOLUTION
    # IPT-CANARY lab00 add_impl
    return np.asarray(a) + np.asarray(b)
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "add", "locked": true, "points": 10, "solution": false, "schema_version": 3} part_title="Adding"
check("add")

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "scale_impl", "locked": false, "solution": true, "schema_version": 3}
def scale(a, k):
    ### BEGIN SOLUTION
    # IPT-CANARY lab00 scale_impl
    return np.asarray(a) * k
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "scale", "locked": true, "points": 5, "solution": false, "schema_version": 3} part_title="Scaling"
check("scale")
