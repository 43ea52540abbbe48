"""What elastic workers ask kolorun's elastic driver (elastic_driver.py),
over HTTP at KOLO_ELASTIC_DRIVER (host:port), and how:
  GET /assignment?worker=W&after=V  waits for a version > V and returns
      {"version", "rank", "size", "local_rank", "local_size",
       "master_addr", "master_port", "job_id"} or {"exit": true}
  GET /hosts?since=T[&wait=S]  {"timestamp": T', "update": 0 none | 1 added | 2 removed | 3 both},
      at once, or (wait) once there is an event newer than T or S s passed
Each request carries the job's driver token (header TOKEN_HEADER:
driver_token of the job's KOLO_SECRET, which every worker has), so that no
other process of the machine, or of the network when the driver answers
there (Ray), can take a worker's place or learn the job's rendezvous;
without it the answer is 403. The worker's side is kolo/_elastic.py.
Standard library only: kolorun loads the runner without kolo's library."""
import hashlib
import hmac
import http.server
import json
import urllib.parse

TOKEN_HEADER = "X-Kolo-Driver-Token"


def driver_token(secret):
    """What a worker shows the driver: an HMAC of the job's secret, not the
    secret itself (which also authenticates the ranks' connections)."""
    return hmac.new(secret.encode(), b"kolo elastic driver", hashlib.sha256).hexdigest()


def make_server(driver, address, secret):
    """A server on (address, a free port) answering driver's
    wait_assignment(worker, after) and hosts_since(since, wait); requests
    without secret's token are refused (none asked when secret is empty)."""
    token = driver_token(secret) if secret else None

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            if token is not None and not hmac.compare_digest(self.headers.get(TOKEN_HEADER, ""), token):
                self.send_error(403)
                return
            url = urllib.parse.urlparse(self.path)
            q = dict(urllib.parse.parse_qsl(url.query))
            if url.path == "/assignment":
                body = driver.wait_assignment(q.get("worker", ""), int(q.get("after", "0")))
            elif url.path == "/hosts":
                body = driver.hosts_since(int(q.get("since", "0")), float(q.get("wait", "0")))
            else:
                self.send_error(404)
                return
            data = json.dumps(body).encode()
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the worker is gone (it exited while it waited for an answer)

    server = http.server.ThreadingHTTPServer((address, 0), Handler)
    server.daemon_threads = True
    return server
