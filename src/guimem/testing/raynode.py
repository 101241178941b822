"""One Ray node on loopback, as its own process: ``python -m guimem.testing.raynode --head`` or ``--join ADDR``.

For testing guimem on a multi-node Ray cluster on one machine: each node is a separate process
tree (started in its own working folder, with its own environment), so killing one is a node
failure. Every address stays on 127.0.0.1, the GCS included: ``ray start`` would advertise the
machine's interface address (it resolves 127.0.0.1 to it), so the node is built the way
``ray.cluster_utils.Cluster`` builds one, with the loopback address given as is.

Prints ``READY <gcs address>`` once the node runs, then waits for SIGTERM/SIGINT and stops its
processes. `LoopbackCluster` starts a head and worker nodes this way (tests, benchmarks).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    """Start the node and keep it running until signalled."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--head", action="store_true", help="start the head node (GCS) of a new cluster")
    where.add_argument("--join", metavar="ADDR", help="the GCS address of the cluster to join (127.0.0.1:PORT)")
    parser.add_argument("--port", type=int, default=0, help="the head's GCS port (0: a free one)")
    parser.add_argument("--num-cpus", type=int, default=1)
    parser.add_argument("--object-store-mb", type=int, default=150)
    parser.add_argument("--temp-dir", default=None, help="Ray's session folder (default: Ray's)")
    args = parser.parse_args(argv)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    from ray._private.node import Node
    from ray._private.parameter import RayParams

    params = RayParams(node_ip_address="127.0.0.1", num_cpus=args.num_cpus, num_gpus=0,
                       object_store_memory=args.object_store_mb * 1024 * 1024, min_worker_port=0, max_worker_port=0,
                       include_dashboard=False, temp_dir=args.temp_dir)
    if args.head:
        params.update_if_absent(gcs_server_port=args.port or _free_port())  # type: ignore[no-untyped-call]
    else:
        params.update_if_absent(gcs_address=args.join, include_log_monitor=False,  # type: ignore[no-untyped-call]
                                node_manager_port=0)
        params.dashboard_agent_listen_port = None
    node = Node(params, head=args.head, shutdown_at_exit=True, spawn_reaper=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    print(f"READY {node.gcs_address}", flush=True)
    stop.wait()
    node.kill_all_processes(check_alive=False, allow_graceful=True)
    return 0


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class LoopbackCluster:
    """A head (no CPUs: it schedules, it runs no episode) and worker nodes, each a separate process tree
    started in its own folder under ``root`` with its own ``HOME`` and ``GUIMEM_CACHE_DIR``.

    Args:
        root: Where the nodes' folders go (``head``, ``node-1``, ...).
        workers: Worker nodes.
        cpus: CPUs each worker node offers.
        object_store_mb: Each node's object store.
        env: Extra environment for the worker nodes (their Ray workers inherit it).
    """

    root: Path
    workers: int = 2
    cpus: int = 1
    object_store_mb: int = 100
    env: dict[str, str] = field(default_factory=dict)
    address: str = ""
    nodes: list[subprocess.Popen[str]] = field(default_factory=list)

    def __enter__(self) -> LoopbackCluster:
        try:
            head = self._node("head", ["--head", "--num-cpus", "0"], {})
            self.address = head
            for i in range(1, self.workers + 1):
                self._node(f"node-{i}", ["--join", self.address, "--num-cpus", str(self.cpus)], self.env)
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def folder(self, name: str) -> Path:
        """A node's working folder."""
        return self.root / name

    def _node(self, name: str, args: list[str], env: dict[str, str]) -> str:
        folder = self.folder(name)
        (folder / "cache").mkdir(parents=True, exist_ok=True)
        node_env = {**os.environ, "HOME": str(folder), "GUIMEM_CACHE_DIR": str(folder / "cache"),
                    "RAY_USAGE_STATS_ENABLED": "0", **env}
        proc = subprocess.Popen([sys.executable, "-m", "guimem.testing.raynode", *args, "--object-store-mb",
                                 str(self.object_store_mb)], cwd=folder, env=node_env, text=True,
                                stdout=subprocess.PIPE, stderr=open(folder / "node.log", "w"),  # noqa: SIM115
                                start_new_session=True)
        self.nodes.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()  # READY <address>, or EOF if the node failed
        if not line.startswith("READY "):
            raise RuntimeError(f"Ray node {name} did not start: {(folder / 'node.log').read_text()[-2000:]}")
        return line.split()[1]

    def kill(self, index: int) -> None:
        """SIGKILL worker node ``index`` (1-based) and every process it started: a machine lost mid-run."""
        from guimem.processes import descendants

        proc = self.nodes[index]
        for pid in [proc.pid, *descendants(proc.pid)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
        proc.wait(30)

    def stop(self) -> None:
        """Stop every node: workers first, the head last (SIGTERM, then SIGKILL after a grace period)."""
        for proc in reversed(self.nodes):
            if proc.poll() is None:
                proc.terminate()
        deadline = time.time() + 30
        for proc in reversed(self.nodes):
            try:
                proc.wait(max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                self.kill(self.nodes.index(proc))
        self.nodes.clear()


if __name__ == "__main__":
    sys.exit(main())
