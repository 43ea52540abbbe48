#!/usr/bin/env bash
# libkolo.so must export the kolo_* API and nothing else, so applications
# never bind to kolo's internals (or to the Boost and C++ symbols inside it),
# and must not need libibverbs to load.
set -euo pipefail
LIB="$TEST_SRCDIR/$TEST_WORKSPACE/bindings/c/libkolo.so"
# Global (upper-case type) defined dynamic symbols.
exported=$(nm -D --defined-only "$LIB" | awk '$2 ~ /^[A-Z]$/ {print $3}')
others=$(echo "$exported" | grep -v '^kolo_' || true)
if [ -n "$others" ]; then
  echo "libkolo.so exports non-kolo symbols:"; echo "$others"; exit 1
fi
for f in kolo_comm_init_from_env kolo_comm_init kolo_get_unique_id kolo_comm_init_rank kolo_comm_init_from_env_config kolo_config_describe kolo_comm_destroy kolo_comm_split kolo_comm_rank kolo_comm_size \
         kolo_comm_local_rank kolo_comm_local_size kolo_comm_get_timeout kolo_allreduce kolo_allreduce_many kolo_allreduce_many_async kolo_allgather kolo_broadcast \
         kolo_reduce_scatter kolo_barrier kolo_allreduce_stream kolo_allgather_stream \
         kolo_broadcast_stream kolo_reduce_scatter_stream kolo_allreduce_many_stream kolo_alltoall_stream kolo_comm_gpu kolo_comm_abort kolo_comm_get_async_error kolo_result_string \
         kolo_comm_register_memory kolo_comm_deregister_memory kolo_get_version \
         kolo_last_error kolo_submit_allreduce kolo_submit_grouped_allreduce kolo_submit_allgather \
         kolo_submit_broadcast kolo_submit_reduce_scatter kolo_submit_alltoall kolo_submit_barrier kolo_join \
         kolo_handle_test kolo_handle_wait kolo_handle_set_callback kolo_handle_output kolo_handle_output_rows \
         kolo_handle_join_rank kolo_handle_release kolo_timeline_start kolo_timeline_stop kolo_engine_get_stats \
         kolo_reduce kolo_gather kolo_gatherv kolo_scatter kolo_scatterv kolo_allgatherv kolo_reduce_scatterv \
         kolo_alltoall kolo_alltoallv \
         kolo_send kolo_recv kolo_recv_any kolo_recv_any_async kolo_group_start kolo_group_end \
         kolo_comm_revoke kolo_comm_shrink kolo_comm_get_unique_id kolo_comm_grow kolo_comm_dump_flight_record; do
  # A here-string, not `echo | grep -q`: grep -q may exit before echo has
  # written everything, and pipefail would count echo's SIGPIPE as a miss.
  grep -qx "$f" <<< "$exported" || { echo "libkolo.so does not export $f"; exit 1; }
done
# libkolo.so must load where libibverbs is not installed (TCP and shared-
# memory jobs need no RDMA): it is opened at run time (transport/ib/
# verbs_library.h), so it is neither needed nor bound to directly.
needed=$(readelf -d "$LIB" | awk '/\(NEEDED\)/ {print $NF}' | tr -d '[]')
[ -n "$needed" ] || { echo "readelf -d $LIB lists no NEEDED entry"; exit 1; }
if grep -Ei 'ibverbs|libnl' <<< "$needed"; then
  echo "libkolo.so needs libibverbs at load time (NEEDED above); it must be dlopen'd"; exit 1
fi
verbs_refs=$(nm -D --undefined-only "$LIB" | awk '{print $NF}' | grep -E '^_*ibv_' || true)
if [ -n "$verbs_refs" ]; then
  echo "libkolo.so binds verbs functions directly (call them through VerbsLibrary):"; echo "$verbs_refs"; exit 1
fi
echo "exports_test: $(echo "$exported" | wc -l) symbols, all kolo_*; needs $(echo $needed)"
