"""Launcher pieces that run beside the ranks, not in them: the elastic
driver behind `kolorun --min-np/--max-np/--host-discovery-script`."""
