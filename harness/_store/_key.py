"""The key that seals run stores: `HARNESS_SECRET`, else a random key in a file of the user's, made once.

Invariants:

- A key is a key: an empty, whitespace-only or non-UTF-8 `HARNESS_SECRET` is refused; a key file that is not a
  regular file (a symlink to `/dev/null`, a directory, a FIFO, a device), holds no hex, or holds fewer than
  `MIN_KEY_BYTES` bytes of key is refused, each with a one-line `SealKeyError` naming the file and the fix. No key
  is ever empty, so nobody can re-seal a forged store with one.
- The file appears whole or not at all: the key is written to a temporary file in the same directory (0600),
  flushed to disk, and linked to its name (`os.link` fails when the name exists, so the first writer wins); every
  process racing at first use reads the one key that won. Where the file system has no hard links, a lock file
  serialises the same steps (rename under the lock).
- A key file readable or writable by group or others is used, with a `KeyFileWarning` saying how to fix it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import stat
import tempfile
import warnings
from collections.abc import Generator
from pathlib import Path

KEY_BYTES = 32
"""The key a new key file holds (as hex text)."""
MIN_KEY_BYTES = 16
"""The shortest key a key file may hold."""
_MAX_KEY_FILE = 4096
"""A key file is 64 hex characters; a file past this is not a key file."""


class SealKeyError(Exception):
    """The key cannot be read or created; the message names the fix."""


class KeyFileWarning(UserWarning):
    """The key file can be read by other users than its owner."""


def config_dir() -> Path:
    base = os.environ.get('XDG_CONFIG_HOME') or os.path.join(os.path.expanduser('~'), '.config')
    return Path(base) / 'harness'


def key_path() -> Path:
    return config_dir() / 'secret'


def from_environment() -> bool:
    """Whether the key comes from `HARNESS_SECRET` (set, even if empty) rather than the key file."""
    return 'HARNESS_SECRET' in os.environ


def store_key() -> bytes:
    """The key that seals run stores: `HARNESS_SECRET`, else the user's key file (created on first use)."""
    secret = os.environ.get('HARNESS_SECRET')
    if secret is not None:
        return _secret_key(secret)
    path = key_path()
    found = _read_key(path)
    return found if found is not None else _create_key(path)


def _secret_key(secret: str) -> bytes:
    try:
        text = secret.encode()
    except UnicodeEncodeError:  # os.environ keeps bytes that are not UTF-8 as lone surrogates
        raise SealKeyError(
            'HARNESS_SECRET is not UTF-8 text: set it to a secret in plain text (e.g. the output of '
            '`python -c "import secrets; print(secrets.token_hex(32))"`), or unset it to use the key file.'
        ) from None
    if not secret.strip():
        raise SealKeyError(
            'HARNESS_SECRET is set but empty: set it to a secret (e.g. the output of '
            '`python -c "import secrets; print(secrets.token_hex(32))"`), or unset it to use the key file.'
        )
    return hashlib.sha256(b'harness-secret:' + text).digest()


def _refusal(path: Path, what: str) -> SealKeyError:
    return SealKeyError(
        f'the harness key at {path} {what}: remove it (a new key is made at first use; stores sealed with the old '
        'one can then be read, not written) or set HARNESS_SECRET.'
    )


def _read_key(path: Path) -> bytes | None:
    """The key in the file at `path`, or None when there is no file; `SealKeyError` when it is not a key."""
    try:
        # Not blocking: a FIFO put there must be refused, not waited on. The checks below are of what was opened.
        fd = os.open(path, os.O_RDONLY | getattr(os, 'O_NONBLOCK', 0) | getattr(os, 'O_CLOEXEC', 0))
    except FileNotFoundError:
        if path.is_symlink():
            raise _refusal(path, f'is a symlink to {os.readlink(path)}, which does not exist') from None
        return None
    except OSError as exc:
        raise SealKeyError(
            f'cannot read the harness key at {path} ({exc.strerror}): fix or remove it, or set HARNESS_SECRET.'
        ) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _refusal(path, f'is not a regular file (it is {_kind(info.st_mode)})')
        if info.st_size > _MAX_KEY_FILE:
            raise _refusal(path, f'is not a harness key ({info.st_size} bytes; a key file holds 64 hex characters)')
        data = os.read(fd, _MAX_KEY_FILE + 1)
    except OSError as exc:
        raise SealKeyError(
            f'cannot read the harness key at {path} ({exc.strerror}): fix or remove it, or set HARNESS_SECRET.'
        ) from None
    finally:
        os.close(fd)
    text = data.strip()
    if not text:
        raise _refusal(path, 'is empty')
    try:
        key = bytes.fromhex(text.decode('ascii'))
    except ValueError:  # UnicodeDecodeError is a ValueError
        raise _refusal(path, 'is not a harness key (it holds no hex key)') from None
    if len(key) < MIN_KEY_BYTES:
        raise _refusal(path, f'is too short ({len(key)} bytes of key; a key has {KEY_BYTES}, at least {MIN_KEY_BYTES})')
    if info.st_mode & 0o077:
        warnings.warn(
            f'the harness key at {path} can be read by other users (mode {stat.S_IMODE(info.st_mode):04o}): '
            f'`chmod 600 {path}`.',
            KeyFileWarning,
            stacklevel=2,
        )
    return key


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, 'a directory'),
        (stat.S_ISCHR, 'a character device, such as /dev/null'),
        (stat.S_ISBLK, 'a block device'),
        (stat.S_ISFIFO, 'a FIFO'),
        (stat.S_ISSOCK, 'a socket'),
    ):
        if test(mode):
            return name
    return 'not a file'


def _create_key(path: Path) -> bytes:
    """Make the key file, whole or not at all; the key in it (another process's, if that one was first)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, temporary = tempfile.mkstemp(prefix='.secret-', dir=path.parent)  # 0600
    except OSError as exc:
        raise SealKeyError(f'cannot create the harness key at {path} ({exc.strerror}): set HARNESS_SECRET.') from None
    key = secrets.token_bytes(KEY_BYTES)
    try:
        with os.fdopen(fd, 'w') as f:
            f.write(key.hex())
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(temporary, path)  # the name appears with the whole key behind it; a second link fails
        except FileExistsError:
            return _existing(path)
        except OSError:  # a file system without hard links: the same steps under a lock
            with _locked(path.parent / '.secret.lock'):
                found = _read_key(path)
                if found is not None:
                    return found
                os.replace(temporary, path)
        _sync_dir(path.parent)
        return key
    except OSError as exc:
        raise SealKeyError(f'cannot create the harness key at {path} ({exc.strerror}): set HARNESS_SECRET.') from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temporary)


def _existing(path: Path) -> bytes:
    found = _read_key(path)
    if found is None:  # gone again between the link and the read: someone removes it while it is made
        raise SealKeyError(f'the harness key at {path} was removed while it was made: try again.')
    return found


@contextlib.contextmanager
def _locked(path: Path) -> Generator[None]:
    import fcntl  # POSIX; the file systems without hard links this is for are mounted on POSIX systems

    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _sync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):  # not every platform can open a directory
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
