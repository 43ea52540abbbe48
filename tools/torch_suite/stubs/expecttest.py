"""Stand-in for the `expecttest` package, which Debian does not ship but
torch.testing._internal.common_utils imports: it reads `ACCEPT` and derives
its TestCase from `TestCase`. The distributed suite never calls
assertExpectedInline (expecttest's one feature), so this is enough."""
import unittest

ACCEPT = False


class TestCase(unittest.TestCase):
    pass
