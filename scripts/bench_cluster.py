"""What the benchmark scripts share: child processes stopped together, ports, readiness, model
directories and a gateway with simulated workers (`pdserve sim`). Imported by
scripts/prefix-cache-bench and scripts/disaggregation-bench; not a command."""
import json
import os
import socket
import subprocess
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("PDSERVE_BIN", os.path.join(ROOT, "build", "pdserve"))


class Processes:
    def __init__(self, out):
        self.out, self.procs = out, []

    def start(self, name, argv):
        log = open(os.path.join(self.out, name + ".log"), "w")
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(p)
        return p

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for p in reversed(self.procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = []


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_json(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
        return json.loads(r.read())


def wait_ready(port, workers, timeout):
    end = time.time() + timeout
    while time.time() < end:
        try:
            if http_json(port, "/health").get("workers", 0) >= workers:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=5) as r:
                    if r.status == 200:
                        return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


def read_ready_file(path, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        if os.path.exists(path) and os.path.getsize(path) > 0:
            with open(path) as f:
                return json.load(f)
        time.sleep(0.1)
    raise RuntimeError(f"{path} did not appear within {timeout} s")


def make_model(out, preset):
    path = os.path.join(out, preset)
    if not os.path.exists(os.path.join(path, "config.json")):
        subprocess.run([BIN, "make-model", "--preset", preset, "--out", path], check=True,
                       stdout=subprocess.DEVNULL)
    return path


def sim_model(out, profile):
    """A model directory for simulated workers of `profile`: the profile's model shape (no
    weights: simulated workers read none) with tiny's byte-level tokenizer."""
    path = os.path.join(out, "sim-" + profile)
    if os.path.exists(os.path.join(path, "config.json")):
        return path
    tiny = make_model(out, "tiny")
    os.makedirs(path, exist_ok=True)
    for name in os.listdir(tiny):
        if name.endswith(".json") or name.endswith(".jinja"):
            with open(os.path.join(tiny, name), "rb") as src, \
                    open(os.path.join(path, name), "wb") as dst:
                dst.write(src.read())
    with open(os.path.join(ROOT, "profiles", profile + ".json")) as f:
        shape = json.load(f)["model_shape"]
    with open(os.path.join(path, "config.json")) as f:
        config = json.load(f)
    config.update(shape)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    return path


def start_sim_cluster(procs, out, name, model, profile, prefill, decode, gateway_flags=()):
    """A gateway (ledger NAME.sqlite in OUT) and `pdserve sim` with PREFILL and DECODE workers
    of PROFILE, registered and ready; returns (http_port, ledger path)."""
    ready = os.path.join(out, name + "-ready.json")
    if os.path.exists(ready):
        os.remove(ready)
    ledger = os.path.join(out, name + ".sqlite")
    procs.start(name + "-gateway", [BIN, "gateway", "--model", model, "--port", "0",
                                    "--control-port", "0", "--ready-file", ready, "--ledger",
                                    ledger, "--io-threads", "2", *gateway_flags])
    ports = read_ready_file(ready)
    procs.start(name + "-sim", [BIN, "sim", "--model", model, "--gateway",
                                f"127.0.0.1:{ports['control_port']}", "--profile", profile,
                                "--prefill", str(prefill), "--decode", str(decode)])
    if not wait_ready(ports["http_port"], prefill + decode, 120):
        raise RuntimeError(f"{name}: the simulated workers did not register")
    return ports["http_port"], ledger
