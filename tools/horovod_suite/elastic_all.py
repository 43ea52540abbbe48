"""Horovod's elastic torch tests with none skipped: test_elastic_torch.py
skips four of elastic_common.BaseElasticTests' tests (Horovod's issues 2030
and 2908, failures of its own gloo runner); here they run on kolo too.

    tools/horovod_suite/run_elastic.sh HOROVOD_CHECKOUT $PWD/tools/horovod_suite/elastic_all.py
"""
import os
import unittest

from elastic_common import BaseElasticTests


class ElasticTorchAllTests(BaseElasticTests, unittest.TestCase):
    def __init__(self, *args, **kwargs):
        script = os.path.join(os.environ["HOROVOD_CHECKOUT"], "test", "integration", "data", "elastic_torch_main.py")
        super().__init__(script, *args, **kwargs)
