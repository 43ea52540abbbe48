"""A kolo job as a launcher starts it: allreduce, allgather and broadcast on
NumPy arrays, each checked against values computed here in closed form.
   allreduce.py WORLD_SIZE   (the size the launcher was asked for)"""
import sys

import numpy as np

import kolo

want_size = int(sys.argv[1])
kolo.init()
r, n = kolo.rank(), kolo.size()
assert n == want_size, f"world size {n}, launcher asked for {want_size}"
assert 0 <= kolo.local_rank() < kolo.local_size() <= n, (kolo.local_rank(), kolo.local_size())
for count in (1, 1000, 100003):
    x = np.arange(count, dtype=np.float64) + 1000.0 * r
    total = kolo.allreduce(x, op=kolo.Sum, name=f"sum{count}")
    want = n * np.arange(count, dtype=np.float64) + 1000.0 * n * (n - 1) / 2
    assert np.array_equal(total, want), f"allreduce of {count}: {total[:4]} != {want[:4]}"
    avg = kolo.allreduce(np.full(count, float(r + 1), dtype=np.float32), op=kolo.Average, name=f"avg{count}")
    assert np.allclose(avg, (n + 1) / 2), f"average of {count}: {avg[:4]}"
ranks = kolo.allgather(np.array([r], dtype=np.int64), name="ranks")
assert list(ranks) == list(range(n)), ranks
root_value = kolo.broadcast(np.array([r * 7], dtype=np.int32), root_rank=n - 1, name="bcast")
assert root_value[0] == (n - 1) * 7, root_value
where = f"local {kolo.local_rank()} of {kolo.local_size()}, cross {kolo.cross_rank()} of {kolo.cross_size()}"
kolo.shutdown()
print(f"python rank {r} of {n} ok ({where})", flush=True)
