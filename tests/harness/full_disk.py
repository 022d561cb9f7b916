"""A disk that fills up, for unit tests of what the log does on ENOSPC.

``monkeypatch.setattr(os, "write", FullDisk(tmp_path, room=100))``: writes to
files under ``tmp_path`` (optionally only those whose name ends in ``suffix``)
get ``room`` more bytes through, the last of them in a short write as a real
full disk gives, and then fail with ENOSPC.  Other writes are untouched.
"""
import errno
import os

_real_write = os.write


class FullDisk:
    def __init__(self, dir, room=0, suffix=""):
        self.dir, self.room, self.suffix = str(dir), room, suffix

    def __call__(self, fd, data):
        path = os.readlink(f"/proc/self/fd/{fd}")
        if not (path.startswith(self.dir) and path.endswith(self.suffix)):
            return _real_write(fd, data)
        n = min(len(data), self.room)
        if not n:
            # The real os.write keeps no reference to the caller's buffer in the
            # traceback; this frame's would pin it (a bytearray could not grow).
            del data
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= n
        return _real_write(fd, memoryview(data)[:n])
