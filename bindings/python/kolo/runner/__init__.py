"""Launcher pieces that run beside the ranks, not in them, standard library
only (tools/kolorun loads them without kolo's library; PyYAML for a
--config-file alone): a fixed job's driver (fixed_job) over each host's
supervisor (supervisor, sent to the host; session is its launcher side), the hosts and where ranks go (hosts), which network
each host uses (network), and the elastic driver (elastic_driver, with
emulated_hosts) behind `kolorun --min-np/--max-np/--host-discovery-script`,
and horovodrun's tuning flags as kolo's settings (horovodrun_flags)."""
