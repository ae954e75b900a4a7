"""Public tests of every lab get the `lab` fixture: the learner's notebook, assembled from its exported cells.

`pytest labs/lab01_strided/tests` runs them against labs/lab01_strided/lab01_strided.ipynb;
LABKIT_NOTEBOOK=path/to/notebook.ipynb (or a jupytext .py) runs them against another notebook.
"""
from labkit.pytest_plugin import lab, pytest_collection_finish, pytest_configure, pytest_unconfigure  # noqa: F401
