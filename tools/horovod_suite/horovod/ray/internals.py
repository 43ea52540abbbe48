"""horovod.ray's internals that Horovod's test_ray.py imports and tests
directly: its rank bookkeeping (Coordinator, MiniSettings) and its
placement-group helper. kolo numbers Ray workers with kolo.runner.hosts
(tested by kolo's test_launcher.py and test_ray.py) and places them itself,
so these have no counterpart: each says so when used, and
not_applicable.py counts the tests that use them."""

NO_COUNTERPART = "horovod.ray internal %s: kolo.ray has no such part"


class _Internal:
    name = "?"

    def __init__(self, *args, **kwargs):
        raise NotImplementedError(NO_COUNTERPART % self.name)


class Coordinator(_Internal):
    name = "Coordinator"


class MiniSettings(_Internal):
    name = "MiniSettings"


def create_placement_group(*args, **kwargs):
    raise NotImplementedError(NO_COUNTERPART % "create_placement_group")
