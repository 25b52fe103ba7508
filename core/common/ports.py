"""Loopback ports for the servers the lab starts: a free one, whether a given one is free, and whether
the process group the lab started is the one listening on it.

A server the lab starts is trusted only once it listens itself: anything can answer ``/health`` on a
port, so ``group_listens`` reads Linux's socket tables (``/proc/net/tcp``, ``/proc/net/tcp6``) for the
sockets listening on the port and looks for one among the open files of the group's processes. Where
``/proc`` does not say (not Linux), it answers None.
"""
from __future__ import annotations

import os
import socket
from pathlib import Path

HOST = "127.0.0.1"
LISTEN = "0A"  # a socket's state in /proc/net/tcp: TCP_LISTEN


def free_port(host: str = HOST) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_free(port: int, host: str = HOST) -> bool:
    """Nothing listens on ``host:port`` (a socket can bind it, as a server would: ``SO_REUSEADDR``, so a
    connection that lately closed there does not count)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def listening_sockets(port: int) -> set[str] | None:
    """The inodes of the TCP sockets listening on ``port`` (any address), or None without ``/proc/net/tcp``."""
    tables = [Path("/proc/net/tcp"), Path("/proc/net/tcp6")]
    if not tables[0].is_file():
        return None
    inodes = set()
    for table in tables:
        try:
            rows = table.read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:  # sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
            fields = row.split()
            if len(fields) > 9 and fields[3] == LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes


def group_pids(group: int) -> list[int]:
    """The processes of process group ``group`` that this user may see."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.getpgid(int(entry)) == group:
                    pids.append(int(entry))
            except OSError:  # gone since the listing
                pass
    return pids


def group_listens(group: int, port: int) -> bool | None:
    """A process of group ``group`` holds a socket listening on ``port``; None where ``/proc`` cannot tell."""
    inodes = listening_sockets(port)
    if inodes is None:
        return None
    wanted = {f"socket:[{inode}]" for inode in inodes}
    return any(not wanted.isdisjoint(open_files(pid)) for pid in group_pids(group))


def open_files(pid: int) -> set[str]:
    """What the descriptors of ``pid`` point at (``socket:[inode]`` for a socket); empty when unreadable."""
    folder = f"/proc/{pid}/fd"
    try:
        descriptors = os.listdir(folder)
    except OSError:  # gone, or another user's
        return set()
    found = set()
    for fd in descriptors:
        try:
            found.add(os.readlink(f"{folder}/{fd}"))
        except OSError:  # closed since the listing
            pass
    return found
