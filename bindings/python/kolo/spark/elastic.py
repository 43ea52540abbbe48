"""kolo.spark.run_elastic: horovod.spark.run_elastic on kolo. Spark tasks,
one per slot up to max_num_proc, are the job's hosts and slots; kolorun's
elastic driver (kolo/runner/elastic_driver.py) runs fn on them with
Horovod's elastic semantics, each worker a process of its own that its
task starts, ends and restarts as the driver says:

    import kolo.spark

    def train():
        import kolo.torch as hvd
        hvd.init()
        ...                       # the loop in hvd.elastic.run, a commit a step
        return hvd.rank()

    results = kolo.spark.run_elastic(train, num_proc=2, min_num_proc=1, max_num_proc=4)

A task that Spark loses (its executor gone) takes its worker and its slot
with it: the others reset at their next commit, as under `kolorun
--min-np`. Each task connects to the driver's agent server on this Spark
driver (its address Spark gives executors, spark.driver.host), shows an
HMAC of the job's secret, and is told what to run; a task that hears
nothing from the driver for AGENT_SILENCE_S ends its worker and itself.
Every worker's output comes back to the caller's stdout and stderr (or
this process's), each line prefixed with its task: "[1]<stdout>:...".
"""
import base64
import hashlib
import hmac
import json
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

from kolo.runner.elastic_driver import ElasticDriver

HEARTBEAT_S = 5  # the driver's word to every task, at least this often
AGENT_SILENCE_S = 30  # a task that hears nothing this long takes the driver for gone
RESET_GRACE_S = 30  # a worker that does not reset within this after the others is ended

# What a worker process runs: the job's function from the file the task
# wrote, its result pickled to the second file when it returns.
_WORKER = """
import os, pickle, sys
with open(sys.argv[1], "rb") as f:
    fn, args, kwargs = pickle.load(f)
result = fn(*args, **kwargs)
with open(sys.argv[2] + ".part", "wb") as f:
    pickle.dump(result, f)
os.replace(sys.argv[2] + ".part", sys.argv[2])
"""


def _proof(secret, task):
    return hmac.new(secret.encode(), b"kolo spark task %d" % task, hashlib.sha256).hexdigest()


def _agent(job, payload):
    """The body of every Spark task (mapPartitionsWithIndex's function):
    registers with the driver, then runs the workers it is told to, one at
    a time, until the driver says close or is gone."""
    def body(index, _partition):
        import signal
        import tempfile
        from kolo.runner.supervisor import free_port
        conn = socket.create_connection((job["driver"], job["port"]), timeout=job["start_timeout"])
        conn.settimeout(AGENT_SILENCE_S)
        reader, writer = conn.makefile("rb"), conn.makefile("wb")
        lock = threading.Lock()
        work = tempfile.mkdtemp(prefix="kolo-spark-")
        function = os.path.join(work, "function.pickle")
        with open(function, "wb") as f:
            f.write(payload)
        worker = None

        def send(msg):
            with lock:
                try:
                    writer.write(json.dumps(msg).encode() + b"\n")
                    writer.flush()
                except OSError:
                    pass  # the driver is gone: the read below ends the task

        def pump(stream, name):
            for raw in iter(stream.readline, b""):
                send({"out": [name, raw.decode(errors="replace")]})
            stream.close()

        def reap(proc, result, pumps):
            proc.wait()
            for t in pumps:
                t.join(timeout=5)
            data = None
            if proc.returncode == 0 and os.path.exists(result):
                with open(result, "rb") as f:
                    data = base64.b64encode(f.read()).decode()
                os.remove(result)
            send({"exit": {"status": proc.returncode, "result": data}})

        host = socket.gethostbyname(socket.gethostname())
        send({"hello": {"task": index, "host": host, "proof": _proof(job["secret"], index)}})
        try:
            for line in iter(reader.readline, b""):
                msg = json.loads(line)
                if "start" in msg:
                    result = os.path.join(work, "result-%d.pickle" % msg["start"]["serial"])
                    env = dict(os.environ, **msg["start"]["env"])
                    worker = subprocess.Popen([sys.executable, "-c", _WORKER, function, result], env=env,
                                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                              stderr=subprocess.PIPE, start_new_session=True)
                    pumps = [threading.Thread(target=pump, args=(s, n), daemon=True)
                             for s, n in ((worker.stdout, "stdout"), (worker.stderr, "stderr"))]
                    for t in pumps:
                        t.start()
                    threading.Thread(target=reap, args=(worker, result, pumps), daemon=True).start()
                elif "end" in msg and worker is not None and worker.poll() is None:
                    os.killpg(worker.pid, msg["end"])
                elif "port" in msg:
                    send({"port": free_port()})
                elif "close" in msg:
                    break
        except (OSError, ValueError):
            pass  # silent past AGENT_SILENCE_S, or the connection broke: the driver is gone
        finally:
            if worker is not None and worker.poll() is None:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait()
            conn.close()
            for name in os.listdir(work):
                os.remove(os.path.join(work, name))
            os.rmdir(work)
        yield index
    return body


class _Agent:
    """The driver's side of one task: its messages read on a thread of its
    own; the worker it runs, if any."""

    def __init__(self, task, host, conn, reader, tasks):
        self.task, self.host, self.conn, self.reader, self.tasks = task, host, conn, reader, tasks
        self.lock = threading.Lock()
        self.lost = False
        self.worker = None  # the _TaskWorker it runs now
        self.port = None  # a free port of its host, when asked
        self.port_told = threading.Event()

    def send(self, msg):
        with self.lock:
            try:
                self.conn.sendall(json.dumps(msg).encode() + b"\n")
            except OSError:
                pass  # read() sees the loss

    def read(self):
        try:
            for line in iter(self.reader.readline, b""):
                msg = json.loads(line)
                if "out" in msg:
                    self.tasks.forward(self.task, *msg["out"])
                elif "exit" in msg and self.worker is not None:
                    worker, self.worker = self.worker, None
                    worker.exited(msg["exit"]["status"], msg["exit"]["result"])
                elif "port" in msg:
                    self.port = msg["port"]
                    self.port_told.set()
        except (OSError, ValueError):
            pass
        self.lost = True
        if self.worker is not None:  # lost with its task: a failure of its worker
            self.worker.exited(1, None, "its Spark task %d on %s was lost" % (self.task, self.host))
        self.port_told.set()


class _TaskWorker:
    """A worker in a task, seen as the elastic driver sees a worker process:
    poll(), wait(), returncode; and the function's result (returned:
    whether it returned one)."""

    def __init__(self, agent):
        self.agent = agent
        self.returncode = None
        self.result, self.returned = None, False
        self.ended = threading.Event()
        self.ended_by_driver = False  # end(): its exit status is no failure of its own

    def exited(self, status, data, why=None):
        if data is not None:
            import pickle
            self.result, self.returned = pickle.loads(base64.b64decode(data)), True
        if status != 0 and not self.ended_by_driver:
            self.agent.tasks.failed(self.agent.task, status, why)
        self.returncode = status
        self.ended.set()

    def poll(self):
        return self.returncode

    def wait(self, timeout=None):
        if not self.ended.wait(timeout):
            raise subprocess.TimeoutExpired("spark task %d" % self.agent.task, timeout)
        return self.returncode


class _SparkTasks:
    """The elastic driver's launcher (see kolo/runner/worker_processes.py
    for its four methods) for workers in Spark tasks, and the server the
    tasks connect to."""

    def __init__(self, bind_address, secret, stdout, stderr, timestamp):
        self.bind_address, self.secret = bind_address, secret
        self.streams = {"stdout": stdout or sys.stdout, "stderr": stderr or sys.stderr}
        self.timestamp = timestamp
        self.agents = {}  # task -> _Agent
        self.cond = threading.Condition()
        self.out_lock = threading.Lock()
        self.serial = 0
        self.driver_port = None
        self.say = lambda text: None  # the driver's, once it is made
        self.last_error = {}  # task -> the last line its worker wrote to stderr
        self.first_failure = None  # what the job's error names
        self.closed = False
        self.listener = socket.create_server((bind_address, 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()
        threading.Thread(target=self.beat, daemon=True).start()

    def accept(self):
        while not self.closed:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self.welcome, args=(conn,), daemon=True).start()

    def welcome(self, conn):
        """A task's hello, checked; then its agent reads on this thread."""
        conn.settimeout(AGENT_SILENCE_S)
        reader = conn.makefile("rb")
        try:
            hello = json.loads(reader.readline())["hello"]
            if not hmac.compare_digest(str(hello.get("proof", "")), _proof(self.secret, int(hello["task"]))):
                raise ValueError("wrong proof")
        except (OSError, ValueError, KeyError, TypeError):
            conn.close()  # not one of this job's tasks
            return
        conn.settimeout(None)  # the task's heartbeat is its output and exits; the driver's is beat()
        agent = _Agent(int(hello["task"]), hello["host"], conn, reader, self)
        with self.cond:
            self.agents[agent.task] = agent
            self.cond.notify_all()
        agent.read()
        with self.cond:
            self.cond.notify_all()

    def beat(self):
        while not self.closed:
            time.sleep(HEARTBEAT_S)
            for agent in self.live():
                agent.send({"heartbeat": True})

    def live(self):
        with self.cond:
            return [a for a in sorted(self.agents.values(), key=lambda a: a.task) if not a.lost]

    def wait_for(self, count, deadline):
        with self.cond:
            while len([a for a in self.agents.values() if not a.lost]) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(left)
        return True

    def hosts(self):
        """[(host, live tasks there)], the driver's discovery."""
        counts = {}
        for agent in self.live():
            counts[agent.host] = counts.get(agent.host, 0) + 1
        return list(counts.items())

    def failed(self, task, status, why=None):
        what = why or "task %d's worker exited with status %s: %s" % (task, status, self.last_error.get(task, ""))
        self.say(what)
        self.first_failure = self.first_failure or what

    def forward(self, task, stream, text):
        if stream == "stderr" and text.strip():
            self.last_error[task] = text.strip()
        when = time.asctime() + " " if self.timestamp else ""
        with self.out_lock:
            self.streams[stream].write("%s[%d]<%s>:%s" % (when, task, stream, text if text.endswith("\n")
                                                          else text + "\n"))

    # -- the launcher's four methods ---------------------------------------
    def start(self, host, slot, env, prefix):
        del slot, prefix  # any idle task of the host; the task's index prefixes the output
        idle = [a for a in self.live() if a.host == host and a.worker is None]
        if not idle:  # its task was lost since the discovery: a worker that failed at once
            worker = _TaskWorker(SimpleNamespace(task=-1, tasks=self))
            worker.exited(1, None, "no Spark task left on %s" % host)
            return worker
        agent = idle[0]
        worker = agent.worker = _TaskWorker(agent)
        self.serial += 1
        env = dict(env, KOLO_ELASTIC_DRIVER="%s:%d" % (self.bind_address, self.driver_port), PYTHONUNBUFFERED="1")
        agent.send({"start": {"env": env, "serial": self.serial}})
        return worker

    def end(self, worker, sig=None):
        import signal
        if worker.poll() is None and hasattr(worker.agent, "send"):
            worker.ended_by_driver = True
            worker.agent.send({"end": int(sig or signal.SIGTERM)})

    def rendezvous(self, workers):
        """Rank 0's host and a port free there, asked of its task."""
        if not workers:
            return "127.0.0.1", 0
        agent = workers[0].proc.agent
        agent.port_told.clear()
        agent.send({"port": True})
        if agent.port_told.wait(AGENT_SILENCE_S) and agent.port:
            return agent.host, agent.port
        from kolo.runner.supervisor import free_port
        return agent.host, free_port()

    def close(self):
        self.closed = True
        for agent in self.live():
            agent.send({"close": True})
        self.listener.close()


def _driver_address(sc):
    """The address Spark's executors reach this driver at."""
    host = sc.getConf().get("spark.driver.host") or socket.gethostname()
    return socket.gethostbyname(host)


def run_elastic(fn, args=(), kwargs=None, num_proc=None, min_num_proc=None, max_num_proc=None,
                start_timeout=None, elastic_timeout=None, reset_limit=None, env=None, stdout=None, stderr=None,
                verbose=1, nics=None, prefix_output_with_timestamp=False, min_np=None, max_np=None):
    """Runs fn(*args, **kwargs) as an elastic job of num_proc workers
    (default: the context's default parallelism), going on with as few as
    min_num_proc (default num_proc) and growing to max_num_proc (default
    num_proc) as Spark's tasks allow; returns the results of the workers
    that finished, in rank order. start_timeout (default 600 s, or
    HOROVOD_SPARK_START_TIMEOUT): for num_proc tasks to start (the job
    starts when they have, or then with as many as have, if min_num_proc
    have; else TimeoutError); elastic_timeout (default 600 s, or
    HOROVOD_ELASTIC_TIMEOUT): most time below min_num_proc after a change;
    reset_limit: most resets; env adds to every worker's environment; nics:
    the interfaces the workers may use (the first is KOLO_IFNAME); verbose
    >= 2 says each task as it registers. Raises RuntimeError when the job
    fails, naming the first failure."""
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is None:
        session = SparkSession.builder.master("local[%d]" % (num_proc or os.cpu_count())).getOrCreate()
    sc = session.sparkContext
    num_proc = num_proc or sc.defaultParallelism
    min_np = min_num_proc or min_np or num_proc
    max_np = max_num_proc or max_np or num_proc
    if not 1 <= min_np <= num_proc <= max_np:
        raise ValueError("kolo.spark.run_elastic: needs 1 <= min_num_proc <= num_proc <= max_num_proc, got %s, %s, %s"
                         % (min_np, num_proc, max_np))
    start_timeout = start_timeout or int(os.environ.get("HOROVOD_SPARK_START_TIMEOUT", "600"))
    elastic_timeout = elastic_timeout or int(os.environ.get("HOROVOD_ELASTIC_TIMEOUT", "600"))
    secret, group = secrets.token_hex(32), "kolo-spark-elastic-" + secrets.token_hex(8)
    tasks = _SparkTasks(_driver_address(sc), secret, stdout, stderr, prefix_output_with_timestamp)
    from pyspark import cloudpickle
    payload = cloudpickle.dumps((fn, tuple(args), dict(kwargs or {})))
    job = {"driver": tasks.bind_address, "port": tasks.port, "secret": secret, "start_timeout": start_timeout}
    spark_error = []

    def run_tasks():
        sc.setJobGroup(group, "kolo.spark.run_elastic: %d tasks" % max_np, interruptOnCancel=True)
        try:
            sc.parallelize(range(max_np), max_np).mapPartitionsWithIndex(_agent(job, payload)).collect()
        except Exception as e:  # cancelled at the end, or Spark gave up on a task
            spark_error.append(e)
    spark_job = threading.Thread(target=run_tasks, daemon=True)
    spark_job.start()
    driver = None
    try:
        # num_proc tasks to start with, as Spark starts them together; as
        # few as min_num_proc when start_timeout passes without the rest.
        if not tasks.wait_for(num_proc, time.monotonic() + start_timeout) and len(tasks.live()) < min_np:
            raise TimeoutError("Timed out waiting for Spark tasks to start. kolo.spark.run_elastic: %d of the %d "
                               "tasks it needs started within start_timeout %s s"
                               % (len(tasks.live()), min_np, start_timeout))
        if verbose >= 2:
            for agent in tasks.live():
                sys.stderr.write("kolo.spark: task %d on %s\n" % (agent.task, agent.host))
        opts = SimpleNamespace(
            np=num_proc, min_np=min_np, max_np=max_np, hosts="", host_discovery_script="", slots=1,
            discovery_interval=1.0, elastic_timeout=elastic_timeout, min_hosts=1, reset_limit=reset_limit or 0,
            host_failure_limit=1, blacklist_cooldown_range=None, reset_grace=RESET_GRACE_S,
            start_timeout=start_timeout, no_prefix=True)
        ranks_env = {"KOLO_JOB_ID": group, "KOLO_SECRET": secret}
        if nics:
            ranks_env["KOLO_IFNAME"] = sorted(nics)[0] if isinstance(nics, set) else list(nics)[0]
        ranks_env.update({k: str(v) for k, v in (env or {}).items()})
        driver = ElasticDriver(opts, [], ranks_env, "", tasks.out_lock, launcher=tasks, discovery=tasks.hosts)
        tasks.say = driver.say
        tasks.driver_port = driver.serve()
        status = driver.run()
    finally:
        tasks.close()
        sc.cancelJobGroup(group)
        spark_job.join(timeout=60)
    if status != 0:
        raise RuntimeError("kolo.spark.run_elastic: the job failed (%s)%s" % (
            driver.failure or "unknown", "; first failure: " + tasks.first_failure if tasks.first_failure else ""))
    finished = sorted((w for w in driver.workers.values() if w.done and w.proc.returned), key=lambda w: w.rank)
    return [w.proc.result for w in finished]
