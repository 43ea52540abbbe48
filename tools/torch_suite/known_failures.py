"""Why kolo fails the suite's tests that it fails, by test name: each is
the test's or torch's refusal of any backend not named gloo, none a fault
of kolo's (summarize.py prints the reason beside the failure, and flags a
failure that has none)."""

_BUILDS_NO_MODEL = ("the test builds its model only for a backend named gloo, mpi or nccl; under any other "
                    "name its body reaches `ddp_model` unset (UnboundLocalError)")
_GLOO_ONLY_FUNCTION = ("torch's dist.monitored_barrier() raises ValueError for every backend but gloo (kolo's "
                       "group.monitored_barrier() method, gloo's protocol, passes the test that calls it)")

REASONS = {
    "test_accumulate_gradients_no_sync": _BUILDS_NO_MODEL,
    "test_accumulate_gradients_no_sync_allreduce_hook": _BUILDS_NO_MODEL,
    "test_accumulate_gradients_no_sync_allreduce_with_then_hook": _BUILDS_NO_MODEL,
    "test_accumulate_gradients_no_sync_grad_is_view": _BUILDS_NO_MODEL,
    "test_monitored_barrier_gloo": _GLOO_ONLY_FUNCTION,
    "test_monitored_barrier_gloo_subgroup": _GLOO_ONLY_FUNCTION,
    "test_monitored_barrier_failure_order": _GLOO_ONLY_FUNCTION,
    "test_monitored_barrier_wait_all_ranks": _GLOO_ONLY_FUNCTION,
    "test_monitored_barrier_allreduce_hang": _GLOO_ONLY_FUNCTION,
    "test_monitored_barrier_allreduce_hang_wait_all_ranks": _GLOO_ONLY_FUNCTION,
}


def reason(test):
    return REASONS.get(test)
