"""Writing a file atomically: a temporary file beside it, fsynced, renamed onto it.

`replace_atomically` is how model files (and the command line's predictions) are
written: a failure at any point, a full disk included, leaves the previous file whole.
The temporary file is locked (``flock``) by its writer, so that the orphans of killed
writers can be told from live writers' files and removed (`_remove_orphans`).
`write_target` says where a path is written and whether atomically (a FIFO or a device
is written in place).
"""
import errno
import os
import re
import stat
import time

try:
    import fcntl
except ImportError:  # Windows: no advisory locks, so no clean-up of orphaned temp files
    fcntl = None

__all__ = ["replace_atomically", "write_target"]


def _temp_name(base):
    # os.urandom is what secrets.token_hex reads (without importing secrets and random)
    return f".{base}.{os.urandom(6).hex()}.tmp"


def _create_temp(directory, base):
    """A new temporary file beside the target, locked (see `_remove_orphans`)."""
    for _ in range(100):
        tmp = os.path.join(directory, _temp_name(base))
        try:
            # the mode is filtered by the umask, as for any new file
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0),
                         0o666)
        except FileExistsError:
            continue
        if fcntl is not None:
            try:  # held until the file is renamed and closed: "my writer is alive"
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                pass  # e.g. a file system without locks: written all the same
        return tmp, fd
    raise FileExistsError(f"could not create a temporary file next to {base!r} in {directory!r}")


# a temporary file younger than this is never removed as an orphan: its writer may be
# between creating it and locking it
_ORPHAN_AGE = 60.0


def _remove_orphans(directory, base):
    """Remove the temporary files that killed writers of the same target left behind.

    A writer holds an exclusive `flock` on its temporary file ``.BASE.<12 hex>.tmp``
    from just after creating it until it has been renamed onto the target. A file of
    that name beside the target is an orphan when its lock can be taken (its writer is
    gone: the kernel drops the locks of a dead process) and it is older than
    `_ORPHAN_AGE` seconds; it is then removed, under that lock. A live writer's file is
    never removed, whatever its age. Nothing is done where `fcntl` does not exist.
    """
    if fcntl is None:
        return
    pattern = re.compile(re.escape(f".{base}.") + r"[0-9a-f]{12}\.tmp\Z")
    try:
        names = [name for name in os.listdir(directory) if pattern.match(name)]
    except OSError:
        return
    for name in names:
        tmp = os.path.join(directory, name)
        try:
            fd = os.open(tmp, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
                         | getattr(os, "O_NONBLOCK", 0))
        except OSError:
            continue
        try:
            before = os.fstat(fd)
            if not stat.S_ISREG(before.st_mode) or time.time() - before.st_mtime < _ORPHAN_AGE:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # its writer is alive
            if os.path.samestat(os.lstat(tmp), before):
                os.unlink(tmp)
        except OSError:
            pass  # e.g. removed meanwhile by another writer's clean-up
        finally:
            os.close(fd)


def _fsync_directory(directory):
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return  # e.g. Windows: directories cannot be opened
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_target(path):
    """``(target, atomic)``: where `replace_atomically` writes `path`, and whether through a
    temporary file renamed onto it.

    A symlink's file is replaced, not the link; an existing FIFO, device or ``/dev/fd/N``
    is written in place, since a rename would replace it rather than write to it."""
    path = os.fspath(path)
    try:
        mode = os.stat(path).st_mode  # follows symlinks
    except OSError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        return path, False
    if os.path.islink(path):
        real = os.path.realpath(path)
        if mode is None or (os.path.exists(real) and os.path.samefile(real, path)):
            return real, True
        # a /proc/PID/fd link to a deleted file names no path that could be renamed onto
        return path, False
    return path, True


def replace_atomically(path, write, *, binary=True):
    """Write a file through ``write(fileobj)`` into a temporary file beside `path`, then
    rename it onto `path`: a failure at any point leaves the previous file whole (model
    files; the command line's predictions). A symlink stays: the file it points to is
    replaced. An existing FIFO, character device or ``/dev/fd/N`` is written directly
    (see `write_target`).

    The temporary file is ``.NAME.<12 hex digits>.tmp`` in the target's directory. A
    writer that is killed leaves it behind; the next successful write of the same
    target removes it once it is older than a minute and no live writer holds its lock
    (`_remove_orphans`). A full disk (or quota, or file size limit) is an `OSError`
    naming `path` and saying that the previous file there is intact."""
    path = os.fspath(path)
    target, atomic = write_target(path)
    if not atomic:
        try:
            with open(target, "wb" if binary else "w") as f:
                write(f)
        except OSError as exc:  # (a device that fills, a FIFO's reader gone)
            raise OSError(exc.errno, f"cannot write {path}: {exc.strerror or exc}") from None
        return
    directory = os.path.dirname(os.path.abspath(target))
    base = os.path.basename(target)
    existed = os.path.exists(target)
    try:
        tmp, fd = _create_temp(directory, base)
    except OSError as exc:  # name the user's path, not the temporary file's
        raise OSError(exc.errno, f"cannot write {path}: {exc.strerror or exc}") from None
    written = False
    try:
        try:
            # closing flushes what `write` left buffered: a full disk may show only there
            with os.fdopen(fd, "wb" if binary else "w") as f:
                write(f)
                written = True
                f.flush()
                os.fsync(f.fileno())
                # renamed while still open, so locked: never taken for an orphan
                os.replace(tmp, target)
        except OSError as exc:
            if not written and exc.errno not in _NO_SPACE:
                raise  # e.g. an input of `write` that failed: its own message
            raise _write_error(exc, path, existed) from None
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_directory(directory)
    _remove_orphans(directory, base)


# errors of a write that found no room: the disk, a quota, the file size limit
_NO_SPACE = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC), errno.EFBIG}


def _write_error(exc, path, existed):
    """`exc` of writing the temporary file for `path`, naming `path` and what it holds."""
    kept = (f"the previous {path} is intact" if existed else f"no file was written at {path}")
    message = f"cannot write {path}: {exc.strerror or exc}; {kept}"
    return OSError(exc.errno, message) if exc.errno is not None else OSError(message)

