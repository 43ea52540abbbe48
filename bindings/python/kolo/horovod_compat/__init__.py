"""A folder for the ranks' PYTHONPATH, not a module to import: `kolorun
--horovod` puts it first there, so that a Horovod program's `import
horovod.torch as hvd` (and horovod.tensorflow, horovod.tensorflow.keras,
horovod.keras) gives kolo's modules, with no edit to the program."""
