"""The settings of Horovod's elastic driver that its tests patch
(mock.patch('horovod.runner.elastic.driver.DISCOVER_HOSTS_FREQUENCY_SECS',
...)); launch._run_elastic reads them when it starts kolorun's driver."""
DISCOVER_HOSTS_FREQUENCY_SECS = 1.0
ELASTIC_TIMEOUT_SECS = 600
