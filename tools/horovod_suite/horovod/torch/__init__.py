"""horovod.torch is kolo.torch: this module replaces itself with it."""
import sys

import kolo.torch

sys.modules[__name__] = kolo.torch
