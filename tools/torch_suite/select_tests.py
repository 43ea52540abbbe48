"""A pytest plugin (run.sh loads it) that picks the suite's tests by their
own names: TORCH_SUITE_SELECT and TORCH_SUITE_EXCLUDE are regular
expressions searched in each test's function name; a test runs when it
matches the first (if set) and not the second (if set). pytest's -k would
also match the folders above the file, and a Bazel output folder such as
k8-optcuda holds words the selection excludes."""
import os
import re


def pytest_collection_modifyitems(config, items):
    select = os.environ.get("TORCH_SUITE_SELECT")
    exclude = os.environ.get("TORCH_SUITE_EXCLUDE")
    kept, dropped = [], []
    for item in items:
        name = item.originalname or item.name
        wanted = (not select or re.search(select, name)) and not (exclude and re.search(exclude, name))
        (kept if wanted else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
