"""A Slurm job's output file, read only when it is the job's own: the job record names the path, so the
path is untrusted and the opened file itself must prove it belongs to the job's user.

A held job can point `StdOut=` at anything: another user's 0600 output, the bot's kubeconfig, or
`/proc/self/environ`. So the file is opened without following a final symlink and without blocking on
a FIFO, and the open descriptor (not the path, which can be swapped) is checked: a regular file, owned
by the job's user, not one of the bot's own files unless the job runs as the bot's user, not on a
kernel pseudo-filesystem (/proc, /sys); then at most `max_bytes` of its tail are read.
"""

from __future__ import annotations

import os
import re
import stat

_JOB_ID = re.compile(r"\d{1,12}(?:_\d{1,9})?(?:\+\d{1,6})?")
_PSEUDO_FILESYSTEMS = ("/proc", "/sys")
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


def _pseudo_devices() -> set[int]:
    """Device numbers of /proc and /sys on this host (a file there is never job output)."""
    devices = set()
    for mount in _PSEUDO_FILESYSTEMS:
        try:
            devices.add(os.stat(mount).st_dev)
        except OSError:
            continue
    return devices


def _refusal(*, info: os.stat_result, job_uid: int, bot_uid: int, shown: str) -> str | None:
    """Why the opened file is not this job's output, or None when it is."""
    if not stat.S_ISREG(info.st_mode):
        return f"{shown} is not a regular file"
    if info.st_dev in _pseudo_devices():
        return f"{shown} is on a kernel pseudo-filesystem"
    if info.st_uid == bot_uid and job_uid != bot_uid:
        return f"{shown} belongs to the bot, not to the job's user"
    if info.st_uid != job_uid:
        return f"{shown} does not belong to the job's user"
    return None


def read_job_output(
    *,
    path: str | None,
    job_id: str,
    job_uid: int | None,
    max_bytes: int,
    bot_uid: int | None = None,
) -> tuple[str, str]:
    """The tail of a job's output file and a note saying what was read or why nothing was.

    `job_uid` is the job's user id from the scheduler's record (None when unknown: nothing is read);
    `bot_uid` defaults to this process's effective uid.
    """
    if not path or path == "/dev/null":
        return "", "job output: no StdOut file"
    if not _JOB_ID.fullmatch(job_id or ""):
        return "", "job output: not read (invalid job id)"
    expanded = path.replace("%j", job_id)
    shown = expanded[:200]
    if not os.path.isabs(expanded) or "\x00" in expanded:
        return "", f"job output: not read ({shown!r} is not an absolute path)"
    if job_uid is None:
        return "", "job output: not read (the job's user is unknown, so the file's owner cannot be checked)"
    me = os.geteuid() if bot_uid is None else bot_uid
    try:
        descriptor = os.open(expanded, _OPEN_FLAGS)
    except OSError as error:
        reason = "it is a symbolic link" if error.errno == getattr(os, "ELOOP", -1) else error.strerror
        return "", f"job output: cannot read {shown} ({reason})"
    try:
        info = os.fstat(descriptor)
        refused = _refusal(info=info, job_uid=job_uid, bot_uid=me, shown=shown)
        if refused is not None:
            return "", f"job output: not read ({refused})"
        size = info.st_size
        start = max(0, size - max(0, max_bytes))
        chunks: list[bytes] = []
        remaining = min(max_bytes, size - start)
        while remaining > 0:
            chunk = os.pread(descriptor, min(remaining, 65_536), start)
            if not chunk:
                break
            chunks.append(chunk)
            start += len(chunk)
            remaining -= len(chunk)
    except OSError as error:
        return "", f"job output: cannot read {shown} ({error.strerror})"
    finally:
        os.close(descriptor)
    data = b"".join(chunks)
    return data.decode("utf-8", "replace"), f"job output: last {len(data)} of {size} bytes of {shown}"
