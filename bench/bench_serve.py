"""`onlinepgs serve` against `onlinepgs predict` on the same rows: rows a second.

``predict`` is one whole process as a user runs it (start-up, imports, reading the model,
parsing, predicting, writing), ``/usr/bin/time -f '%e %M' onlinepgs predict MODEL DATA
-o /dev/null``; its rows a second are DATA's rows over that wall time. The server is
started once (a daemon pays its start-up once) on 127.0.0.1, and a client in this process
sends DATA's lines on one connection as fast as the server takes them (a thread sends,
another reads: pipelining) and reads every answer; its rows a second are DATA's rows
over the time from the connection to the last answer. With ``--clients 2`` two such
clients send DATA at once (the rows of both over the time the last one ends). The runs
alternate (predict, one client, two clients, predict, ...) after a warm-up of each;
medians of ``--repeats``, and the median of the per-round ratios to predict.

    python bench/bench_serve.py --train TRAIN.svm --data TEST.svm --repeats 5

(TRAIN: the model is trained on it first, ``--sigma 1e-4``, or ``--sigma`` as given.) With ``--learn``, a server
of ``serve --learn`` started once, and one pipelining client sending DATA in each round
(each row answered, then learned, test then train: the model goes on learning from round
to round), against ``onlinepgs train DATA -i MODEL`` as a whole process (one pass over
the same rows, the same model continued), ``/usr/bin/time -f '%e %M' onlinepgs train
DATA -i MODEL -o OUT --quiet``, in the same rounds. ``--train-options`` adds options to
the first training (e.g. ``"-b 24 --geometry adaptive"`` for a VW file). The servers'
peak resident memory (Linux's VmHWM, read before they stop) is printed beside
predict's and train -i's, each a median over the rounds where it is a whole process.
"""
import argparse
import os
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

CLI = [sys.executable, "-m", "onlinepgs.cli"]
HOST = "127.0.0.1"


def predict_seconds(model, data):
    """predict's whole process: wall seconds and peak RSS (KB)."""
    out = subprocess.run(["/usr/bin/time", "-f", "%e %M", *CLI, "predict", model, data,
                          "-o", "/dev/null", "--kind", "scores"],
                         capture_output=True, text=True, check=True)
    wall, rss = out.stderr.strip().splitlines()[-1].split()
    return float(wall), int(rss)


def train_seconds(model, data, out):
    """train -i's whole process: wall seconds and peak RSS (KB)."""
    proc = subprocess.run(["/usr/bin/time", "-f", "%e %M", *CLI, "train", data, "-i", model,
                           "-o", out, "--quiet"], capture_output=True, text=True, check=True)
    wall, rss = proc.stderr.strip().splitlines()[-1].split()
    return float(wall), int(rss)


def start_server(model, directory, *flags):
    port_file = os.path.join(directory, f"port-{time.monotonic_ns()}")
    proc = subprocess.Popen([*CLI, "serve", model, "--port", "0", "--port-file", port_file,
                             "--kind", "scores", *flags],
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not os.path.exists(port_file):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("the server did not start")
        time.sleep(0.05)
    with open(port_file) as f:
        return proc, int(f.read())


def peak_kib(pid):
    """The peak resident memory of process `pid` so far, KiB (Linux's VmHWM)."""
    with open(f"/proc/{pid}/status") as f:
        return int(f.read().split("VmHWM:")[1].split()[0])


def client(port, payload, n_lines, result, i):
    """One pipelining client: send everything, read every answer line (bounded: 600 s)."""
    conn = socket.create_connection((HOST, port), timeout=600)
    start = time.perf_counter()
    sender = threading.Thread(target=lambda: (conn.sendall(payload),
                                              conn.shutdown(socket.SHUT_WR)))
    sender.start()
    lines = 0
    while lines < n_lines:
        part = conn.recv(1 << 20)
        if not part:
            break
        lines += part.count(b"\n")
    result[i] = (time.perf_counter() - start, lines)
    sender.join(600)
    conn.close()


def cpu_seconds(pid):
    """User + system CPU seconds of process `pid` so far (Linux's /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def served_seconds(port, payload, n_lines, clients, server=None, cpu=None):
    """Wall seconds of `clients` pipelining clients sending payload at once; with
    `server` (its process), the server's and this process's (the clients') CPU seconds
    added to cpu[clients] (a pair)."""
    if server is not None:
        before = cpu_seconds(server.pid), sum(os.times()[:2])
    results = [None] * clients
    threads = [threading.Thread(target=client, args=(port, payload, n_lines, results, i))
               for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    assert all(r is not None and r[1] == n_lines for r in results), results
    if server is not None:
        spent = cpu_seconds(server.pid) - before[0], sum(os.times()[:2]) - before[1]
        cpu[clients] = [a + b for a, b in zip(cpu.get(clients, (0.0, 0.0)), spent)]
    return max(r[0] for r in results)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--learn", action="store_true")
    parser.add_argument("--sigma", default="1e-4",
                        help="the model's sigma (auto: a race, which the model continues)")
    parser.add_argument("--train-options", default="",
                        help="more options of the first training, one string")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "model.pgs")
        subprocess.run([*CLI, "train", args.train, "-o", model, "--sigma", args.sigma,
                        "--quiet", *shlex.split(args.train_options)], check=True)
        with open(args.data, "rb") as f:
            payload = f.read()
        n = payload.count(b"\n")
        server, port = start_server(model, tmp)
        figures = {"predict": [], "serve, 1 client": [], "serve, 2 clients": []}
        ratios = {"serve, 1 client": [], "serve, 2 clients": []}
        learner = None
        if args.learn:
            learner, learn_port = start_server(model, tmp, "--learn")
            figures.update({"train -i": [], "serve --learn": []})
            ratios.update({"serve --learn": []})
        rss, train_rss, served_peak, cpu = [], [], {}, {}
        try:
            for round_ in range(args.repeats + 1):  # round 0: the warm-up
                wall, peak = predict_seconds(model, args.data)
                timed = (server, cpu) if round_ else ()
                one = served_seconds(port, payload, n, 1, *timed)
                two = served_seconds(port, payload, n, 2, *timed)
                if learner is not None:
                    trained, train_peak = train_seconds(model, args.data,
                                                        os.path.join(tmp, "t.pgs"))
                    learned = served_seconds(learn_port, payload, n, 1)
                if round_ == 0:
                    continue
                rss.append(peak)
                figures["predict"].append(n / wall)
                figures["serve, 1 client"].append(n / one)
                figures["serve, 2 clients"].append(2 * n / two)
                ratios["serve, 1 client"].append(wall / one)
                ratios["serve, 2 clients"].append(2 * wall / two)
                if learner is not None:
                    train_rss.append(train_peak)
                    figures["train -i"].append(n / trained)
                    figures["serve --learn"].append(n / learned)
                    ratios["serve --learn"].append(wall / learned)
            served_peak = {name: peak_kib(proc.pid) for name, proc in
                           (("serve", server), ("serve --learn", learner)) if proc}
        finally:
            for proc in (server, learner):
                if proc is not None:
                    proc.send_signal(signal.SIGTERM)
                    proc.wait(60)
        print(f"{n} rows, {len(payload) / 2**20:.1f} MiB; medians of {args.repeats} "
              f"rounds; peak RSS: predict {statistics.median(rss) / 1024:.0f} MB"
              + (f", train -i {statistics.median(train_rss) / 1024:.0f} MB" if train_rss
                 else "")
              + "".join(f", {name} {kib / 1024:.0f} MB" for name, kib in served_peak.items()))
        for name, values in figures.items():
            ratio = (f"  {statistics.median(ratios[name]):.2f}x predict"
                     if name in ratios else "")
            print(f"{name:18s} {statistics.median(values):12,.0f} rows/s{ratio}")
        for clients, (server_cpu, client_cpu) in sorted(cpu.items()):
            rows = clients * n * args.repeats
            print(f"serve, {clients} client{'s' if clients > 1 else ''}: CPU a row "
                  f"{server_cpu / rows * 1e6:.2f} us in the server, "
                  f"{client_cpu / rows * 1e6:.2f} us in the clients")


if __name__ == "__main__":
    main()
