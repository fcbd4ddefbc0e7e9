# SPDX-License-Identifier: Apache-2.0
"""nginx serving a directory on 127.0.0.1, for tests that want a production HTTP server
beside the test servers: its own byte ranges, ETags ("MTIME-SIZE" in hex) and If-Match.

    with nginx_server.start(root) as srv:
        srv.url      # http://127.0.0.1:PORT

The server runs in the foreground (no daemon, no master process) with a configuration,
temporary folders and logs in a folder of its own, bound to 127.0.0.1 on a port the
kernel chose; it is stopped (SIGTERM, then SIGKILL) when the block ends. `available()`
says whether an nginx binary is installed (Debian: nginx-light)."""
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

CANDIDATES = ("/usr/sbin/nginx", "/usr/local/sbin/nginx")


def binary():
    for p in CANDIDATES:
        if os.access(p, os.X_OK):
            return p
    return shutil.which("nginx")


def available():
    return binary() is not None


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


CONF = """worker_processes 1;
daemon off;
master_process off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log {d}/access.log;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    default_type application/octet-stream;
    sendfile on;
    server {{
        listen 127.0.0.1:{port};
        root {root};
        location / {{ }}
    }}
}}
"""


class Server:
    def __init__(self, url, folder):
        self.url = url
        self.folder = folder

    def requests(self):
        """The access log's lines: one per request served so far."""
        try:
            with open(os.path.join(self.folder, "access.log")) as f:
                return f.read().splitlines()
        except OSError:
            return []


@contextlib.contextmanager
def start(root, lifetime=300):
    exe = binary()
    if exe is None:
        raise RuntimeError("nginx is not installed (Debian: apt-get install nginx-light)")
    d = tempfile.mkdtemp(prefix="stoker-nginx-")
    proc = None
    try:
        for _ in range(5):  # the port may be taken between choosing and binding it
            port = _free_port()
            with open(os.path.join(d, "nginx.conf"), "w") as f:
                f.write(CONF.format(d=d, port=port, root=os.path.abspath(root)))
            proc = subprocess.Popen([exe, "-p", d, "-c", os.path.join(d, "nginx.conf")],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            deadline = time.monotonic() + 10
            up = False
            while time.monotonic() < deadline and proc.poll() is None:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    up = True
                    break
                except OSError:
                    time.sleep(0.05)
            if up:
                break
            err = proc.stderr.read().decode(errors="replace") if proc.poll() is not None else ""
            proc.kill()
            proc.wait()
            proc = None
            if "Address already in use" not in err:
                raise RuntimeError("nginx did not start: " + err.strip())
        if proc is None:
            raise RuntimeError("nginx did not start: no free port")
        end = time.monotonic() + lifetime
        yield Server("http://127.0.0.1:%d" % port, d)
        assert time.monotonic() < end, "the test ran past the server's lifetime"
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(d, ignore_errors=True)
