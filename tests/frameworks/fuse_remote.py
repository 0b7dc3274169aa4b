#!/usr/bin/env python3
"""A read-only FUSE file system over a local directory whose reads take
the time a remote object store's would: each READ request waits
``--latency-ms`` and the daemon serves at most ``--mib-per-s`` in all,
as a FUSE client of S3 or GCS (Mountpoint, gcsfuse, s3fs) shows a data
loader. Speaks the kernel's FUSE protocol on /dev/fuse itself (no libfuse
binding needed); files are opened with FOPEN_DIRECT_IO, so every read
reaches the daemon, as an uncached remote mount's do.

    fuse_remote.py SOURCE MOUNTPOINT [--latency-ms MS] [--mib-per-s R] [--threads N]

Runs until SIGTERM/SIGINT, then unmounts. Prints "mounted" once ready.
"""
import argparse
import ctypes
import errno
import os
import signal
import stat
import struct
import sys
import threading
import time

IN_HEADER = struct.Struct("<IIQQIIIHH")  # len opcode unique nodeid uid gid pid extlen pad
OUT_HEADER = struct.Struct("<IiQ")  # len error unique
ATTR = struct.Struct("<QQQQQQIIIIIIIIII")  # fuse_attr (88 bytes)

LOOKUP, FORGET, GETATTR, OPEN, READ, STATFS, RELEASE = 1, 2, 3, 14, 15, 17, 18
GETXATTR, LISTXATTR, FLUSH, INIT, OPENDIR, READDIR, RELEASEDIR = 22, 23, 25, 26, 27, 28, 29
ACCESS, INTERRUPT, DESTROY, BATCH_FORGET = 34, 36, 38, 42
NO_REPLY = {FORGET, BATCH_FORGET, INTERRUPT}
FUSE_ASYNC_READ = 1
FOPEN_DIRECT_IO = 1


class Tree:
    """Node ids for the paths under the source directory."""

    def __init__(self, root):
        self.root = os.path.abspath(root)
        self.paths = {1: self.root}
        self.ids = {self.root: 1}
        self.lock = threading.Lock()

    def path(self, node):
        with self.lock:
            return self.paths.get(node)

    def node(self, path):
        with self.lock:
            if path not in self.ids:
                n = len(self.paths) + 1
                self.ids[path] = n
                self.paths[n] = path
            return self.ids[path]


class Link:
    """The remote store's link: a shared byte budget a second."""

    def __init__(self, mib_per_s):
        self.rate = mib_per_s * (1 << 20) if mib_per_s > 0 else 0
        self.lock = threading.Lock()
        self.free_at = time.monotonic()

    def take(self, nbytes):
        if not self.rate:
            return
        with self.lock:
            start = max(self.free_at, time.monotonic())
            self.free_at = start + nbytes / self.rate
            done = self.free_at
        delay = done - time.monotonic()
        if delay > 0:
            time.sleep(delay)


def attr_of(node, st):
    kind = stat.S_IFMT(st.st_mode)
    mode = kind | (0o555 if kind == stat.S_IFDIR else 0o444)
    return ATTR.pack(node, st.st_size, (st.st_size + 511) // 512, int(st.st_atime),
                     int(st.st_mtime), int(st.st_ctime), 0, 0, 0, mode, 1, 0, 0, 0, 4096, 0)


class Server:
    def __init__(self, args, fd):
        self.fd = fd
        self.tree = Tree(args.source)
        self.latency = args.latency_ms / 1e3
        self.link = Link(args.mib_per_s)
        self.files = {}
        self.next_fh = 1
        self.lock = threading.Lock()
        self.stopping = False

    def reply(self, unique, error=0, payload=b""):
        try:
            os.write(self.fd, OUT_HEADER.pack(OUT_HEADER.size + len(payload), -error, unique) + payload)
        except OSError as e:
            if e.errno not in (errno.ENOENT, errno.ENODEV):  # interrupted or unmounted
                raise

    def entry(self, node, path):
        st = os.lstat(path)
        return struct.pack("<QQQQII", node, 0, 1, 1, 0, 0) + attr_of(node, st)

    def handle(self, opcode, unique, node, body):
        if opcode == INIT:
            major, minor, readahead, _flags = struct.unpack_from("<IIII", body)
            out = struct.pack("<IIIIHHIIHHI7I", 7, min(minor, 31), readahead, FUSE_ASYNC_READ,
                              16, 12, 128 << 10, 1, 32, 0, 0, *([0] * 7))
            return self.reply(unique, 0, out)
        if opcode == LOOKUP:
            name = body.split(b"\0", 1)[0].decode()
            parent = self.tree.path(node)
            path = os.path.join(parent, name) if parent else None
            if not path or not os.path.lexists(path):
                return self.reply(unique, errno.ENOENT)
            return self.reply(unique, 0, self.entry(self.tree.node(path), path))
        if opcode == GETATTR:
            path = self.tree.path(node)
            if not path:
                return self.reply(unique, errno.ENOENT)
            return self.reply(unique, 0, struct.pack("<QII", 1, 0, 0) + attr_of(node, os.lstat(path)))
        if opcode in (OPEN, OPENDIR):
            path = self.tree.path(node)
            if not path:
                return self.reply(unique, errno.ENOENT)
            with self.lock:
                fh = self.next_fh
                self.next_fh += 1
                self.files[fh] = path if opcode == OPENDIR else open(path, "rb", buffering=0)
            flags = FOPEN_DIRECT_IO if opcode == OPEN else 0
            return self.reply(unique, 0, struct.pack("<QII", fh, flags, 0))
        if opcode == READ:
            fh, offset, size = struct.unpack_from("<QQI", body)
            with self.lock:
                f = self.files.get(fh)
            if f is None:
                return self.reply(unique, errno.EBADF)
            data = os.pread(f.fileno(), size, offset)
            time.sleep(self.latency)
            self.link.take(len(data))
            return self.reply(unique, 0, data)
        if opcode == READDIR:
            fh, offset, size = struct.unpack_from("<QQI", body)
            with self.lock:
                path = self.files.get(fh)
            names = [".", ".."] + sorted(os.listdir(path))
            out = b""
            for i, name in enumerate(names[offset:], start=offset + 1):
                full = os.path.join(path, name)
                ino = self.tree.node(full) if name not in (".", "..") else 1
                kind = 4 if os.path.isdir(full) else 8
                raw = name.encode()
                rec = struct.pack("<QQII", ino, i, len(raw), kind) + raw
                rec += b"\0" * (-len(rec) % 8)
                if len(out) + len(rec) > size:
                    break
                out += rec
            return self.reply(unique, 0, out)
        if opcode in (RELEASE, RELEASEDIR):
            fh = struct.unpack_from("<Q", body)[0]
            with self.lock:
                f = self.files.pop(fh, None)
            if f is not None and not isinstance(f, str):
                f.close()
            return self.reply(unique)
        if opcode == FLUSH:
            return self.reply(unique)
        if opcode == STATFS:
            return self.reply(unique, 0, struct.pack("<5Q4I6I", 0, 0, 0, 0, 0, 4096, 255, 4096, 0, *([0] * 6)))
        if opcode == DESTROY:
            self.stopping = True
            return self.reply(unique)
        return self.reply(unique, errno.ENOSYS)

    def serve(self):
        while not self.stopping:
            try:
                request = os.read(self.fd, (1 << 20) + 4096)
            except OSError as e:
                if e.errno in (errno.EINTR, errno.ENOENT, errno.EAGAIN):
                    continue
                return  # ENODEV: unmounted
            length, opcode, unique, node, *_ = IN_HEADER.unpack_from(request)
            body = request[IN_HEADER.size:length]
            if opcode in NO_REPLY:
                continue
            try:
                self.handle(opcode, unique, node, body)
            except OSError as e:
                self.reply(unique, e.errno or errno.EIO)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("source")
    ap.add_argument("mountpoint")
    ap.add_argument("--latency-ms", type=float, default=0.0)
    ap.add_argument("--mib-per-s", type=float, default=0.0)
    ap.add_argument("--threads", type=int, default=8)
    args = ap.parse_args()
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open("/dev/fuse", os.O_RDWR)
    opts = f"fd={fd},rootmode=40000,user_id=0,group_id=0,allow_other".encode()
    if libc.mount(b"remote", args.mountpoint.encode(), b"fuse.remote", 0, opts) != 0:
        e = ctypes.get_errno()
        sys.exit(f"mount {args.mountpoint}: {os.strerror(e)}")
    server = Server(args, fd)
    threads = [threading.Thread(target=server.serve, daemon=True) for _ in range(args.threads)]
    for t in threads:
        t.start()

    def stop(*_):
        libc.umount2(args.mountpoint.encode(), 2)  # MNT_DETACH
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print("mounted", flush=True)
    while True:
        signal.pause()


if __name__ == "__main__":
    main()
