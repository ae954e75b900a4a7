"""Builds the student's filesystem view inside fresh namespaces, drops privileges, starts the worker.

Run by the sandbox as pid 1 of new pid/mount/net/ipc/uts namespaces (`unshare --fork --kill-child`),
as root, with the standard library only. The new root is an empty tmpfs holding just the system
libraries and the C toolchain (compiled-kernel labs call the system compiler), the Python installation, the allowed site-packages and the engine, all
read-only, plus a private /tmp. Hidden graders, solutions, results and other submissions do not
exist in it. Then: chroot, rlimits, the grading run's own unprivileged uid/gid, no_new_privs, exec the worker.
"""
import ctypes
import json
import os
import resource
import sys

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
PR_SET_NO_NEW_PRIVS = 38
NOBODY = 65534

_libc = ctypes.CDLL(None, use_errno=True)


def _mount(source, target, fstype, flags, data=None):
    if _libc.mount(source and source.encode(), target.encode(), fstype and fstype.encode(), flags, data and data.encode()) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} on {target}: {os.strerror(err)}")


def _bind_ro(source, target):
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        open(target, "a").close()
    _mount(source, target, None, MS_BIND | MS_REC)
    _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def build_root(root, plan):
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755")
    for name in ("usr/lib", "usr/lib64", "usr/libexec", "usr/bin", "usr/include", "etc/alternatives"):
        if os.path.isdir(f"/{name}"):
            _bind_ro(f"/{name}", f"{root}/{name}")
    for link in ("lib", "lib64", "bin"):
        if os.path.islink(f"/{link}"):
            os.symlink(os.readlink(f"/{link}"), f"{root}/{link}")
        elif os.path.isdir(f"/{link}"):
            _bind_ro(f"/{link}", f"{root}/{link}")
    for inside, outside in plan["binds"].items():
        _bind_ro(outside, root + inside)
    os.makedirs(f"{root}/dev", exist_ok=True)
    _mount("tmpfs", f"{root}/dev", "tmpfs", MS_NOSUID, "size=64k,mode=755")
    for dev in ("null", "zero", "urandom", "random"):
        open(f"{root}/dev/{dev}", "a").close()
        _mount(f"/dev/{dev}", f"{root}/dev/{dev}", None, MS_BIND)
    if plan.get("shm"):  # lab.toml shm = true: multiprocessing's locks and queues need POSIX semaphores here
        os.makedirs(f"{root}/dev/shm", exist_ok=True)
        if not plan.get("template"):  # a template's gradings mount their own (grading_mounts)
            _mount("tmpfs", f"{root}/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"size={plan['tmp_mb']}m,mode=1777")
    os.makedirs(f"{root}/proc", exist_ok=True)
    _mount("proc", f"{root}/proc", "proc", MS_NOSUID | MS_NODEV)
    os.makedirs(f"{root}/tmp", exist_ok=True)
    _mount("tmpfs", f"{root}/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={plan['tmp_mb']}m,mode=1777")
    _mount(None, root, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


MNT_DETACH = 2
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET = 0x20000, 0x4000000, 0x8000000, 0x20000000, 0x40000000


def unshare_grading():
    """From a template (see worker.template), chrooted in the jail's root: new mount, pid, network, IPC and
    uts namespaces for one grading, as `unshare --pid --mount --net --ipc --uts` gives a fresh sandbox. The
    caller enters all but the pid namespace at once; its next child is pid 1 of the new one."""
    flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS
    if _libc.unshare(flags) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare: {os.strerror(err)}")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)


def grading_mounts(plan):
    """The grading's own file systems, in its new mount namespace: a fresh private /tmp (and /dev/shm where
    the lab asks for one), in place of the template's; the template's /proc (the host's) is detached, and
    the grading's pid 1 mounts its own (grading_proc)."""
    for target in (b"/proc", b"/tmp"):
        if _libc.umount2(target, MNT_DETACH) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"umount {target.decode()}: {os.strerror(err)}")
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={plan['tmp_mb']}m,mode=1777")
    if plan.get("shm"):
        _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"size={plan['tmp_mb']}m,mode=1777")
    if plan.get("loopback"):
        loopback_up()


def grading_proc():
    """Pid 1 of a grading's pid namespace mounts the /proc that shows that namespace only."""
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV)


def loopback_up():
    """Bring up this network namespace's loopback interface (it starts down): ranks of a distributed lab
    talk TCP on 127.0.0.1, and nothing else is reachable from the namespace."""
    import fcntl
    import socket
    import struct
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14s", b"lo", 0, b"")
        flags = struct.unpack("16sH14s", fcntl.ioctl(sock, 0x8913, request))[1]  # SIOCGIFFLAGS
        fcntl.ioctl(sock, 0x8914, struct.pack("16sH14s", b"lo", flags | 1, b""))  # SIOCSIFFLAGS, IFF_UP


def set_limits(limits):
    for name, value in limits.items():
        resource.setrlimit(getattr(resource, name), (value, value))


def drop_privileges(uid=NOBODY, keyrings=True):
    """Become `uid` for good: no supplementary groups, no_new_privs, and (for a sandbox) fresh keyrings."""
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if keyrings:
        clear_keyrings()


def clear_keyrings():
    """A fresh start in the kernel's keyrings, as the grading's uid. The user, user-session and persistent keyrings
    belong to the uid, not to a process, so keys that an earlier grading under the same uid left there would still
    be readable: they are emptied. The session keyring is inherited across setuid (P0's, where its service manager
    gave it one, would be shared by every grading): the process joins a new, empty one."""
    keyctl = {"x86_64": 250, "aarch64": 219}.get(os.uname().machine)
    if keyctl is None:
        return
    join_session, clear, get_persistent = 1, 7, 22
    user, user_session, session = -4, -5, -3
    _libc.syscall(keyctl, join_session, None)
    persistent = _libc.syscall(keyctl, get_persistent, ctypes.c_long(-1), ctypes.c_long(session))
    for keyring in (user, user_session, persistent):
        if keyring != -1:
            _libc.syscall(keyctl, clear, ctypes.c_long(keyring))


def main():
    plan = json.loads(sys.argv[1])
    root = plan["root"]
    build_root(root, plan)
    if plan.get("loopback"):
        loopback_up()
    os.chroot(root)
    os.chdir("/tmp")
    if not plan.get("template"):  # a template stays root: it forks each grading's zygote, which drops (worker.template)
        set_limits(plan["limits"])
        drop_privileges(plan.get("uid", NOBODY))
    os.execve(plan["argv"][0], plan["argv"], plan["env"])


if __name__ == "__main__":
    main()
