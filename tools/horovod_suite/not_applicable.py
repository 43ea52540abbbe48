"""Horovod's tests that do not apply to the project's versions (torch 2.13,
TensorFlow 2.21 with Keras 3), by test name: each fails on something its
own code does that these versions refuse (Horovod was written for Keras 2
and does not run on Keras 3 itself), or on a kolo API that does not exist
yet. A failure is
counted as not applicable only when its message shows that cause (the
pattern); any other failure of the same test counts as a failure.
summarize.py prints the reason beside each."""
import re

_NO_REF = ("Keras 3's variables have no .ref() (the test keys dicts by var.ref())", r"has no attribute 'ref'")
_LR_ARG = ("the test passes lr= to a Keras optimizer; Keras 3 takes learning_rate= only",
           r"not recognized: \{'lr'")
_OPTIMIZER_V2 = ("the test subclasses Keras 2's OptimizerV2 (super().__init__(name) without learning_rate, "
                 "_create_slots, _resource_apply_dense); Keras 3's optimizers have another interface",
                 r"missing 1 required positional argument: 'learning_rate'")
_COMPUTE_GRADIENTS = ("the test calls Keras 2's private optimizer._compute_gradients, which Keras 3 has not",
                      r"_compute_gradients")
# From 3 ranks on: products of 3 or more values in [-100, 100] overflow
# float16 (the test's own reference is inf too, and inf - inf is nan), and
# the test asks float32 products up to 1e8 to equal TensorFlow's
# sequential product to 1e-4, which only the same order of multiplication
# gives (kolo's are as close to the exact product as TensorFlow's).
_PRODUCT = ("from 3 ranks on the test's float16 products overflow in its own reference (nan) and its float32 "
            "threshold is absolute (1e-4 on products up to 1e8), met only by TensorFlow's order of multiplication",
            r"produces incorrect results", 3)

_MUON = ("the test builds every optimizer in torch.optim, and torch 2.13's new Muon refuses the test's 1-D "
         "parameters before any communication", r"Muon only supports 2D parameters")

_RAY_INTERNAL = ("the test exercises horovod.ray's internal rank bookkeeping or placement helper (Coordinator, "
                 "MiniSettings, create_placement_group), which kolo.ray has no counterpart of: kolo numbers and "
                 "places Ray workers itself (kolo.runner.hosts, tested by kolo's own suites)",
                 r"horovod.ray internal")

_SPARK_LAUNCH_INTERNALS = (
    "the test mocks Horovod's own launch path under horovod.spark.run (the mpirun command line mpi_run builds, "
    "safe_shell_exec, horovod.spark.gloo_run's exec function) and expects the exception its mocks raise; "
    "kolo.spark.run starts the ranks as Spark barrier tasks, through none of them", r"DID NOT RAISE")

_LAUNCH_LOG = ("the launch itself passes as the test asks (the results in rank order, or RuntimeError with "
               "Horovod's message); the test then asserts the verbose lines of Horovod's own driver and task "
               "services (its launch protocol: 'Remote host found:', 'Launched horovod server.', ...), which "
               "kolo's launcher does not have", r"'Remote host found: .*' not found in")

_AGG_HELPER = ("the training runs, and every check of its values and of the optimizer's iterations passes; "
               "the test then reads Horovod's private aggregation helper, opt._agg_helper.counter, an object "
               "kolo's optimizer has not (it counts the passes in a variable of its own)",
               r"has no attribute '_agg_helper'")

NOT_APPLICABLE = {
    # test_static_run.py
    "test_run_success": _LAUNCH_LOG,
    "test_run_failure": _LAUNCH_LOG,
    # test_spark.py (PySpark 4.3), its run part
    "test_spark_run_with_gloo": _SPARK_LAUNCH_INTERNALS,
    "test_spark_run_with_mpi": _SPARK_LAUNCH_INTERNALS,
    "test_spark_run_with_path_with_mpi": _SPARK_LAUNCH_INTERNALS,
    "test_spark_run_num_proc_precedes_spark_cores_with_gloo": _SPARK_LAUNCH_INTERNALS,
    "test_spark_run_num_proc_precedes_spark_cores_with_mpi": _SPARK_LAUNCH_INTERNALS,
    "test_spark_run_defaults_num_proc_to_spark_cores_with_gloo": _SPARK_LAUNCH_INTERNALS,
    "test_spark_run_defaults_num_proc_to_spark_cores_with_mpi": _SPARK_LAUNCH_INTERNALS,
    "test_spark_run_does_not_default_env_to_os_env_with_gloo": _SPARK_LAUNCH_INTERNALS,
    "test_spark_run_does_not_default_env_to_os_env_with_mpi": _SPARK_LAUNCH_INTERNALS,
    "test_spark_run_with_non_zero_exit_with_gloo": _SPARK_LAUNCH_INTERNALS,
    "test_spark_run_with_non_zero_exit_with_mpi": _SPARK_LAUNCH_INTERNALS,
    "test_mpirun_not_found": ("the test runs horovod.spark.run with use_mpi, expecting mpirun's exit status 127 "
                              "with PATH emptied; kolo.spark.run launches no mpirun", r"mpirun failed with exit code"),
    # test_ray.py (Ray 2.60)
    "test_coordinator_registration": _RAY_INTERNAL,
    "test_cross_rank": _RAY_INTERNAL,
    "test_horovod_train_in_pg": _RAY_INTERNAL,
    # test_torch.py (torch 2.13)
    "test_broadcast_state": _MUON,
    "test_broadcast_state_options": _MUON,
    "test_force_allreduce": _MUON,
    # test_tensorflow.py
    "test_horovod_syncbn_cpu": ("the test's reference layer is tf.keras.layers.BatchNormalization(fused=False); "
                                "Keras 3 has no fused argument", r"fused"),
    "test_partial_distributed_gradient_tape": _NO_REF,
    "test_horovod_allreduce_product_cpu": _PRODUCT,
    # test_tensorflow_process_sets.py
    "test_horovod_reducescatter_grad_cpu_process_sets": (
        "the test compares its float16 error with 1e-08, which NumPy 2 rounds to float16 0.0: an exact gradient "
        "(error 0.0) fails 0.0 < 0.0", r"float16\(0\.0\) not less than 1e-08"),
    # test_tensorflow_process_sets_dynamic.py
    "test_horovod_add_get_remove_process_set": ("the test reaches into Horovod's internals (mpi_ops._basics)",
                                                r"has no attribute '_basics'"),
    # test_tensorflow2_keras_process_sets.py
    "test_process_set_optimizer": _OPTIMIZER_V2,
    "test_horovod_grouped_allreduce_product_cpu": _PRODUCT,
    # test_tensorflow2_keras.py
    "test_train_model_lr_schedule": ("the test uses Keras 2's keras.losses.mean_squared_error, ThresholdedReLU and "
                                     "compile(experimental_run_tf_function=), which Keras 3 removed",
                                     r"mean_squared_error|ThresholdedReLU|experimental_run_tf_function"),
    "test_sparse_as_dense": _LR_ARG,
    # (the second reason: under tf_keras, TF_USE_LEGACY_KERAS=1)
    "test_sparse_as_dense_with_grad_aggregation": [_LR_ARG, _AGG_HELPER],
    "test_gradient_aggregation_0": [_OPTIMIZER_V2, _AGG_HELPER],
    "test_gradient_aggregation_1": [_OPTIMIZER_V2, _AGG_HELPER],
    "test_gradient_aggregation_with_local_vars_0": [_OPTIMIZER_V2, _AGG_HELPER],
    "test_gradient_aggregation_with_local_vars_1": [_OPTIMIZER_V2, _AGG_HELPER],
    "test_grad_aggregation_with_inf_grad": _COMPUTE_GRADIENTS,
    "test_legacy_optimizer": ("the test uses keras.optimizers.legacy, which Keras 3 removed",
                              r"keras.optimizers.legacy"),
    "test_partial_distributed_optimizer": _COMPUTE_GRADIENTS,
    "test_broadcast_global_variables_callback_with_local_vars": _NO_REF,
}


def reason(test, message, ranks):
    """The reason test does not apply on this many ranks, if message shows
    it; else None. An entry's third field, when there is one, is the least
    number of ranks it applies from; a test may have a list of entries (its
    reasons with Keras 3 and with tf_keras)."""
    # A parametrized test's cases: name[params] (pytest) or name_params (parameterized).
    entries = (NOT_APPLICABLE.get(test) or NOT_APPLICABLE.get(test.split("[")[0]) or
               next((v for k, v in NOT_APPLICABLE.items() if test.startswith(k + "_")), None))
    for entry in (entries if isinstance(entries, list) else [entries] if entries else []):
        if re.search(entry[1], message) and ranks >= (entry[2] if len(entry) > 2 else 1):
            return entry[0]
    return None
