"""PID 1 of a devcloud machine: runs inside the node, on the node's own python3 (docs/devcloud.md).

``devcloud/machine.py`` builds the machine's root (overlay over the image), mounts its /proc,
/sys, /dev, /run, /tmp, pivots into it and execs this file as ``/run/devcloud/init.py``, with
``/run/devcloud/boot.json`` next to it. Like an image's init + cloud-init on first boot, it:

* sets /etc/hostname and /etc/hosts to the config drive's hostname,
* writes the config drive's ``public_keys`` to /root/.ssh/authorized_keys,
* generates this machine's SSH host keys when it has none (a fresh disk: every deploy),
* starts sshd (unless the devcloud's ``ssh-down`` knob is set) and, when the image has one and
  boot.json asks for it, dockerd with the given arguments,
* writes /run/devcloud/booted.json (timings) and then reaps orphans until SIGTERM, when it
  stops its services and exits (the kernel then kills whatever is left in the machine's PID
  namespace, containers included).

Standard library only, Python 3.6+ (it runs on whatever python3 the image has).
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time

RUN = "/run/devcloud"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def log(msg):
    print(f"{time.strftime('%H:%M:%S')} init: {msg}", flush=True)


def write(path, text, mode=0o644):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def unblocked():
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


def start(cmd, logfile):
    """A service, with a clean signal mask and environment, its output in a log of the node."""
    out = open(logfile, "ab")
    try:
        return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                preexec_fn=unblocked, start_new_session=True,
                                env={"PATH": PATH, "LANG": "C.UTF-8", "HOME": "/root"})
    finally:
        out.close()


def cloud_init(boot):
    hostname = boot["hostname"]
    write("/etc/hostname", hostname + "\n")
    write("/etc/hosts", f"127.0.0.1\tlocalhost\n127.0.1.1\t{hostname}\n::1\t\tlocalhost ip6-localhost ip6-loopback\n")
    os.makedirs("/root/.ssh", mode=0o700, exist_ok=True)
    os.chmod("/root/.ssh", 0o700)
    write("/root/.ssh/authorized_keys", "".join(k + "\n" for k in boot.get("public_keys", [])), 0o600)
    if not any(name.startswith("ssh_host_") and name.endswith("_key") for name in os.listdir("/etc/ssh")):
        started = time.monotonic()
        subprocess.run(["ssh-keygen", "-A"], check=True, stdout=subprocess.DEVNULL, preexec_fn=unblocked)
        log(f"generated SSH host keys in {time.monotonic() - started:.2f} s")


def start_sshd():
    # sshd forks into the background; its pid file is /run/sshd.pid, its log /var/log/sshd.log.
    subprocess.run(["/usr/sbin/sshd", "-E", "/var/log/sshd.log"], check=True, preexec_fn=unblocked,
                   env={"PATH": PATH, "LANG": "C.UTF-8"})


def docker_ready(sock="/run/docker.sock"):
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(1)
        s.connect(sock)
        s.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
        reply = s.recv(64)
        s.close()
        return b" 200 " in reply
    except OSError:
        return False


def main():
    boot = json.load(open(os.path.join(RUN, "boot.json")))
    t0 = time.monotonic()
    signals = {signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
    signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    os.environ.clear()
    os.environ.update({"PATH": PATH, "LANG": "C.UTF-8", "HOME": "/root"})
    booted = {"hostname": boot["hostname"], "image": boot.get("image")}
    cloud_init(boot)
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege separation dir (ssh-up needs it too)
    if boot.get("sshd", True):
        start_sshd()
        booted["sshd_started_s"] = round(time.monotonic() - t0, 3)
        log("sshd started")
    else:
        log("sshd not started (devcloud knob ssh-down)")
    dockerd = None
    engine = next((p for p in ("/usr/sbin/dockerd", "/usr/bin/dockerd") if os.path.exists(p)), None)
    if boot.get("dockerd") is not None and engine:
        dockerd = start([engine, *boot["dockerd"]], "/var/log/dockerd.log")
        booted["dockerd_pid"] = dockerd.pid
        log(f"dockerd started (pid {dockerd.pid})")
    write(os.path.join(RUN, "booted.json"), json.dumps(booted))
    waiting_docker = dockerd is not None
    stopping = None
    while True:
        timeout = 0.1 if waiting_docker else 5
        info = signal.sigtimedwait(signals, timeout)
        while True:  # reap every exited child (orphans of sshd sessions, dockerd's helpers...)
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if dockerd is not None and pid == dockerd.pid:
                dockerd.returncode = -1
                log("dockerd exited")
                waiting_docker = False
        if waiting_docker and docker_ready():
            waiting_docker = False
            booted["dockerd_ready_s"] = round(time.monotonic() - t0, 3)
            write(os.path.join(RUN, "booted.json"), json.dumps(booted))
            log(f"dockerd ready after {booted['dockerd_ready_s']:.2f} s")
        if info is not None and info.si_signo != signal.SIGCHLD and stopping is None:
            log(f"shutting down (signal {info.si_signo})")
            stopping = time.monotonic()
            if dockerd is not None and dockerd.returncode is None:
                os.kill(dockerd.pid, signal.SIGTERM)
            try:
                os.kill(-1, signal.SIGTERM)  # every other process of this machine
            except ProcessLookupError:
                pass  # there is none
        if stopping is not None:
            alive = dockerd is not None and dockerd.returncode is None
            if not alive or time.monotonic() - stopping > 5:
                log("halted")
                sys.exit(0)  # PID 1 exits: the kernel kills the rest of the machine


if __name__ == "__main__":
    main()
