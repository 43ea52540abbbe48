"""kolo's flight records as torch's flight-recorder dumps, for torch's
own analyzer:

    python -m kolo.torch.flight_record KOLO_FLIGHT_RECORDER_DIR OUT_DIR
    python -m torch.distributed.flight_recorder.fr_trace OUT_DIR

kolo writes one JSON record per communicator and rank (every torch group
on kolo is a communicator of its own) when one fails, on SIGUSR1 and on
request (KOLO_FLIGHT_RECORDER_DIR; tools/kolo-doctor reads them). torch's
analyzer (torch 2.13's torch.distributed.flight_recorder.fr_trace) reads one
pickle per process, named <prefix><global rank>, holding all of its groups:

  {"version": "2.10",
   "pg_config": {group_name: {"name", "desc", "ranks": "[0, 1, 2, 3]"}},
   "pg_status": {group_name: {"last_enqueued_collective", ...}},
   "entries": [{record_id, pg_id, process_group: (name, desc),
                collective_seq_id, p2p_seq_id, op_id, is_p2p,
                profiling_name: "nccl:all_reduce", time_created_ns,
                input_sizes: [[n]], output_sizes, input_dtypes: ["Float"],
                output_dtypes, state: "scheduled"|"started"|"completed",
                time_discovered_started_ns, time_discovered_completed_ns,
                duration_ms, retired, timeout_ms, frames: []}, ...]}

The conversion is done at analysis time, over every rank's records: a
rank that came to a call after the others had given up is cut there
(trim_late_arrivals), which needs all of them. What torch's entries have no
place for, fr_trace cannot see: a root or reduce op that differs (kolo-doctor
names those), stack frames (kolo records none), and a send or receive (kolo
records neither peer nor size: left out). fr_trace names as culprit the
ranks that differ from the first dump it reads, so when the culprit's is
read first it blames the others; kolo-doctor has no such bias.
Standard library only, beside torch's analyzer.
"""
import json
import os
import pickle

# torch's FlightRecorder version string (libtorch: version_val); fr_trace
# compares it across ranks and parses "major.minor" (>= 2.7 selects the
# current matching code).
TORCH_FR_VERSION = "2.10"

# kolo's "what" -> the operation name fr_trace's Op accepts (types.py:
# COLLECTIVES, P2P); profiling_name is "<backend>:<name>".
WHAT_TO_TORCH = {
    "allreduce": "all_reduce",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "allgather": "all_gather",
    "allgatherv": "all_gather_v",
    "reduce_scatter": "reduce_scatter",
    "reduce_scatterv": "reduce_scatter_v",
    "alltoallv": "all_to_all",
    "gather": "gather",
    "scatter": "scatter",
    "barrier": "barrier",
}
# kolo's point-to-point calls: recorded with neither peer nor size, which
# fr_trace needs ("send 1->2"), so left out of the dumps.
P2P_WHATS = {"send/recv", "recv_any"}

# kolo dtype_name() -> c10::toString(ScalarType), what torch records.
DTYPE_TO_TORCH = {
    "int8": "Char",
    "uint8": "Byte",
    "int32": "Int",
    "uint32": "UInt32",
    "int64": "Long",
    "uint64": "UInt64",
    "float16": "Half",
    "bfloat16": "BFloat16",
    "float32": "Float",
    "float64": "Double",
}

# fr_trace accepts these prefixes (types.py Op: _SUPPORTED_BACKENDS); kolo
# is not one, so the dumps name "nccl" unless told otherwise.
DEFAULT_BACKEND = "nccl"


def _sizes(name, count, size):
    """(input_sizes, output_sizes) as fr_trace checks them (types.py Op.match):
    all_gather: out numel = in numel * group size; reduce_scatter: in numel =
    out numel * group size; the others in == out. kolo counts elements
    (allgather: per rank; reduce_scatter: the received block; the "v" and
    rooted ones: the total of the counts)."""
    if count is None or count < 0:
        return [[]], [[]]  # barrier, alltoallv: nothing recorded (numel 1 to fr_trace)
    if name == "all_gather":
        return [[count]], [[count * size]]
    if name == "reduce_scatter":
        return [[count * size]], [[count]]
    return [[count]], [[count]]


def _state(kolo_state):
    # torch: scheduled -> started -> completed. kolo's "failed" began and
    # never completed: what torch shows for a collective that hung or
    # errored ("started", not retired).
    return "completed" if kolo_state == "completed" else "started"


def torch_dump(record, group_name, group_desc, global_ranks, pg_id=0, backend=DEFAULT_BACKEND, timeout_ms=0):
    """One kolo flight record (a dict loaded from kolo's JSON) -> the dump
    dict fr_trace expects for that rank, with this one group. global_ranks:
    the group's members as global ranks, in group-rank order (kolo's
    record["rank"] indexes it). collective_seq_id: kolo's seq less the
    point-to-point calls before it in the record; record_id: kolo's seq
    less the entries left out (both are kolo's seq where the record has no
    point-to-point calls, so they line up across ranks)."""
    group_name = str(group_name)
    global_ranks = [int(r) for r in global_ranks]
    size = len(global_ranks)
    if record.get("size") not in (None, size):
        raise ValueError("record of a communicator of %s ranks, group of %d" % (record.get("size"), size))
    entries = []
    p2p_seen = 0  # p2p calls so far in the record
    dropped = 0  # entries left out so far
    last = {"enqueued": -1, "started": -1, "completed": -1}
    for e in sorted(record["entries"], key=lambda x: x["seq"]):
        what = e["what"]
        if what in P2P_WHATS or what not in WHAT_TO_TORCH:  # not matchable, or not a torch operation
            p2p_seen += what in P2P_WHATS
            dropped += 1
            continue
        name = WHAT_TO_TORCH[what]
        collective_seq_id, p2p_seq_id = e["seq"] - p2p_seen, p2p_seen
        ins, outs = _sizes(name, e.get("count"), size)
        dtype = DTYPE_TO_TORCH.get(e.get("dtype"), e.get("dtype")) if e.get("dtype") else None
        in_dtypes = [dtype] * len(ins) if dtype and ins[0] else []
        out_dtypes = [dtype] * len(outs) if dtype and outs[0] else []
        state = _state(e["state"])
        end_ns = e.get("end_ns") or None
        done = e["state"] == "completed"
        last["enqueued"] = last["started"] = collective_seq_id
        if done:
            last["completed"] = collective_seq_id
        entries.append({
            "record_id": e["seq"] - dropped,
            "pg_id": pg_id,
            "process_group": (group_name, group_desc),
            "collective_seq_id": collective_seq_id,
            "p2p_seq_id": p2p_seq_id,
            "op_id": e["seq"],
            "is_p2p": False,
            "profiling_name": "%s:%s" % (backend, name),
            "time_created_ns": e["start_ns"],
            "input_sizes": ins,
            "output_sizes": outs,
            "input_dtypes": in_dtypes,
            "output_dtypes": out_dtypes,
            "state": state,
            "time_discovered_started_ns": e["start_ns"],
            "time_discovered_completed_ns": end_ns if done else None,
            "duration_ms": (end_ns - e["start_ns"]) / 1e6 if done and end_ns else None,
            "retired": done,
            "timeout_ms": timeout_ms,
            "frames": [],
            # kolo's own, ignored by fr_trace
            "kolo_what": what,
            "kolo_op": e.get("op"),
            "kolo_root": e.get("root"),
            "kolo_state": e["state"],
            "kolo_error": e.get("error"),
        })
    return {
        "version": TORCH_FR_VERSION,
        "comm_lib_version": "kolo-flight-record %s" % record.get("version", "?"),
        "pg_config": {group_name: {"name": group_name, "desc": group_desc, "ranks": str(global_ranks)}},
        "pg_status": {group_name: {
            "last_enqueued_collective": last["enqueued"],
            "last_started_collective": last["started"],
            "last_completed_collective": last["completed"],
        }},
        "entries": entries,
        "kolo": {k: record.get(k) for k in ("job", "communicator", "rank", "size", "host", "pid", "dumped_ns",
                                             "reason", "late_at_seq")},
    }


def merge_dumps(dumps):
    """Several groups' dumps of one process -> one. torch's record_id is
    one counter over all of a process's groups: entries are merged by
    start time and numbered from the sum of the groups' first ids (the
    calls that fell off the rings: exact while no ring has wrapped)."""
    if len(dumps) == 1:
        return dumps[0]
    out = {"version": TORCH_FR_VERSION, "comm_lib_version": dumps[0]["comm_lib_version"], "pg_config": {},
           "pg_status": {}, "entries": [], "kolo": [d["kolo"] for d in dumps]}
    base = 0
    for d in dumps:
        for name in d["pg_config"]:
            if name in out["pg_config"]:
                raise ValueError("group %r twice" % name)
        out["pg_config"].update(d["pg_config"])
        out["pg_status"].update(d["pg_status"])
        if d["entries"]:
            base += d["entries"][0]["record_id"]
        out["entries"].extend(d["entries"])
    out["entries"].sort(key=lambda e: (e["time_created_ns"], e["op_id"]))
    for i, e in enumerate(out["entries"]):
        e["record_id"] = base + i
    return out


DEFAULT_FILE_PREFIX = "kolo_fr_trace_rank_"


def write_torch_dump(records_by_group, rank, path):
    """Writes global rank `rank`'s dump for fr_trace: one pickle holding all
    of its groups. records_by_group: {group_name: (record, group_desc,
    global_ranks[, pg_id])} or {group_name: {"record", "desc", "ranks",
    "pg_id"}}; record: a kolo flight-record dict or the path of its JSON.
    path: a file (its name must end in the rank, fr_trace reads the rank
    there: <prefix><rank>, no extension) or a directory (then
    DIR/kolo_fr_trace_rank_<rank>). Returns the file's path."""
    dumps = []
    for i, (name, spec) in enumerate(records_by_group.items()):
        if isinstance(spec, dict):
            record, desc, ranks, pg_id = spec["record"], spec["desc"], spec["ranks"], spec.get("pg_id", i)
        else:
            record, desc, ranks = spec[:3]
            pg_id = spec[3] if len(spec) > 3 else i
        if isinstance(record, str):
            with open(record) as f:
                record = json.load(f)
        ranks = [int(r) for r in ranks]
        if int(rank) != ranks[int(record["rank"])]:
            raise ValueError("group %r: the record of group rank %s is global rank %s, not %s"
                             % (name, record["rank"], ranks[int(record["rank"])], rank))
        dumps.append(torch_dump(record, name, desc, ranks, pg_id=pg_id))
    dump = merge_dumps(dumps)
    if os.path.isdir(path):
        path = os.path.join(path, "%s%d" % (DEFAULT_FILE_PREFIX, int(rank)))
    temporary = path + ".partial"  # ends in no digit: fr_trace's prefix inference skips it
    with open(temporary, "wb") as f:
        pickle.dump(dump, f)
    os.replace(temporary, path)
    return path


def trim_late_arrivals(records):
    """A job-level fix-up over every rank's record of one communicator
    (kolo-doctor's rule): at the first call that failed anywhere, #F, a rank
    that started #F only after the others had given up (after the earliest
    end of #F by TIMEOUT) never arrived in time; its entries from #F on are
    dropped, as its record would have ended had it stayed away (a rank
    woken by kolorun's SIGUSR1 may go on and call #F late). fr_trace cannot
    see this: it compares no times across ranks, and would report a state
    mismatch with the late rank's "completed" #F instead of the rank
    missing. Changes the records in place; returns {rank: dropped count}."""
    failed = [e for r in records for e in r["entries"] if e["state"] == "failed"]
    if not failed:
        return {}
    first = min(e["seq"] for e in failed)
    # Given up by waiting: a rank's timeout at #F. Not a mismatch's or a
    # lost peer's quick failure, after which a rank still on its way to #F
    # would look late.
    waited = [e["end_ns"] for e in failed
              if e["seq"] == first and e["end_ns"] and (e.get("error") or "").startswith("TIMEOUT")]
    if not waited:
        return {}
    give_up = min(waited)
    dropped = {}
    for r in records:
        at = [e for e in r["entries"] if e["seq"] == first]
        if at and at[0]["start_ns"] > give_up:
            keep = [e for e in r["entries"] if e["seq"] < first]
            dropped[r["rank"]] = len(r["entries"]) - len(keep)
            r["entries"] = keep
            r["late_at_seq"] = first
    return dropped


def convert_dir(kolo_dir, out_dir, trim_late=True):
    """Every rank's kolo records in kolo_dir -> one torch dump per rank in
    out_dir. Each torch group is a kolo communicator named "world" of a job
    of its own; the groups are named "0", "1", ... in the order they began
    (the default group first), and only groups of every rank are mapped (a
    group's record does not say which global ranks it has)."""
    jobs = {}
    for f in sorted(os.listdir(kolo_dir)):
        if not (f.startswith("kolo-flight.") and f.endswith(".json")):
            continue
        with open(os.path.join(kolo_dir, f)) as fh:
            record = json.load(fh)
        if record.get("format") == "kolo-flight-record" and record["communicator"] == "world":
            jobs.setdefault(record["job"], []).append(record)
    world = max((r["size"] for records in jobs.values() for r in records), default=0)
    began = {job: min((e["start_ns"] for r in records for e in r["entries"]), default=0)
             for job, records in jobs.items()}
    by_rank = {}
    for i, job in enumerate(sorted((j for j in jobs if jobs[j][0]["size"] == world), key=began.get)):
        if trim_late:
            trim_late_arrivals(jobs[job])
        for record in jobs[job]:
            desc = "default_pg" if i == 0 else "group %d" % i
            by_rank.setdefault(record["rank"], {})[str(i)] = (record, desc, list(range(world)))
    os.makedirs(out_dir, exist_ok=True)
    return [write_torch_dump(groups, rank, out_dir) for rank, groups in sorted(by_rank.items())]


if __name__ == "__main__":
    import sys
    if len(sys.argv) != 3:
        sys.exit("usage: python -m kolo.torch.flight_record KOLO_FLIGHT_RECORDER_DIR OUT_DIR")
    for p in convert_dir(sys.argv[1], sys.argv[2]):
        print(p)
