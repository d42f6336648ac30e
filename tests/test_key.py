"""The key is a key (issue 25.2): a key file that holds no usable key, or is not a file, is refused naming the file
and the fix; it is made whole or not at all, once, however many processes race to make it; an empty or non-UTF-8
`HARNESS_SECRET` is refused in one line. Real files, real FIFOs and symlinks, real processes."""

from __future__ import annotations

import os
import secrets
import stat
import subprocess
import sys
import textwrap
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness import RunRow, StoreError
from harness._store import RunStore
from harness._store._key import KeyFileWarning, SealKeyError, store_key

KEY_MODULE = Path(__file__).resolve().parent.parent / 'harness' / '_store' / '_key.py'


@pytest.fixture
def key_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The key file's path, in a config directory of this test's, with no `HARNESS_SECRET`."""
    monkeypatch.delenv('HARNESS_SECRET')
    monkeypatch.setenv('XDG_CONFIG_HOME', str(tmp_path / 'config'))
    (tmp_path / 'config' / 'harness').mkdir(parents=True)
    return tmp_path / 'config' / 'harness' / 'secret'


def write_key(path: Path, text: str | bytes) -> None:
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    path.chmod(0o600)


BAD_FILES: dict[str, tuple[Callable[[Path], Any], str]] = {
    'empty': (lambda p: write_key(p, ''), 'is empty'),
    'whitespace': (lambda p: write_key(p, ' \n\t\n'), 'is empty'),
    'one byte': (lambda p: write_key(p, 'a'), 'holds no hex key'),
    'one byte of key': (lambda p: write_key(p, 'ab\n'), r'too short \(1 bytes of key'),
    'fifteen bytes of key': (lambda p: write_key(p, 'ab' * 15), r'too short \(15 bytes of key'),
    'not hex': (lambda p: write_key(p, 'correct horse battery staple, not hex'), 'holds no hex key'),
    'binary': (lambda p: write_key(p, os.urandom(64)), 'holds no hex key'),
    'symlink to /dev/null': (lambda p: p.symlink_to('/dev/null'), 'not a regular file.*character device'),
    'dangling symlink': (lambda p: p.symlink_to(p.parent / 'nowhere'), 'symlink to .*which does not exist'),
    'directory': (lambda p: p.mkdir(), 'not a regular file.*a directory'),
    'huge': (lambda p: write_key(p, 'ab' * 10_000), 'is not a harness key'),
}


@pytest.mark.parametrize('case', list(BAD_FILES))
def test_a_key_file_that_holds_no_usable_key_is_refused_naming_the_file_and_the_fix(
    key_home: Path, tmp_path: Path, case: str
) -> None:
    """An empty HMAC key lets anyone re-seal a forged journal: every key file that does not hold a real key is
    refused, in one line naming the file and what to do; nothing is written, and the file is left as it was."""
    make, words = BAD_FILES[case]
    make(key_home)
    before = os.lstat(key_home)
    with pytest.raises(StoreError, match=words) as raised:
        RunStore(tmp_path / 'runs.db')
    message = str(raised.value)
    assert str(key_home) in message and 'remove it' in message and 'HARNESS_SECRET' in message
    assert '\n' not in message
    assert os.lstat(key_home).st_ino == before.st_ino  # not replaced behind the user's back
    assert not (tmp_path / 'runs.db').exists()  # nothing was written without a key


def test_a_fifo_key_file_is_refused_without_waiting_for_a_writer(key_home: Path) -> None:
    """Reading a FIFO blocks until someone writes to it: the key file is checked as opened, without blocking, so a
    FIFO put in its place is refused at once (in a process of its own, so a hang fails the test, not the suite)."""
    os.mkfifo(key_home)
    probe = textwrap.dedent(f"""
        import importlib.util
        spec = importlib.util.spec_from_file_location('key', {str(KEY_MODULE)!r})
        key = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(key)
        try:
            key.store_key()
        except key.SealKeyError as exc:
            print(exc)
    """)
    env = {**os.environ, 'XDG_CONFIG_HOME': str(key_home.parent.parent)}
    env.pop('HARNESS_SECRET', None)
    done = subprocess.run([sys.executable, '-I', '-c', probe], env=env, capture_output=True, text=True, timeout=60)
    assert 'is not a regular file (it is a FIFO)' in done.stdout, done.stdout + done.stderr


def test_a_key_file_readable_by_others_is_used_with_a_warning(key_home: Path, tmp_path: Path) -> None:
    write_key(key_home, os.urandom(32).hex())
    key_home.chmod(0o644)
    with pytest.warns(KeyFileWarning, match=r'can be read by other users \(mode 0644\).*chmod 600'):
        key = store_key()
    assert key == bytes.fromhex(key_home.read_text())
    key_home.chmod(0o600)
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        assert store_key() == key  # private again: no warning


def test_a_symlink_to_a_real_key_file_is_a_key_file(key_home: Path) -> None:
    """Dotfiles are often symlinks: a symlink is followed, and what it names must be a regular file holding a key."""
    real = key_home.parent / 'kept-elsewhere'
    write_key(real, os.urandom(32).hex())
    key_home.symlink_to(real)
    assert store_key() == bytes.fromhex(real.read_text())


def test_a_new_key_file_is_made_whole_private_and_once(key_home: Path, tmp_path: Path) -> None:
    key_home.parent.rmdir()
    key = store_key()
    assert len(key) == 32 and key_home.read_text() == key.hex()
    assert stat.S_IMODE(key_home.stat().st_mode) == 0o600
    assert stat.S_IMODE(key_home.parent.stat().st_mode) == 0o700
    assert [p.name for p in key_home.parent.iterdir()] == ['secret']  # no temporary file left behind
    assert store_key() == key


def test_without_hard_links_the_key_file_is_still_made_once(key_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file system without hard links (some network and FUSE mounts): the same steps, under a lock file."""

    def no_links(*args: Any, **kwargs: Any) -> None:
        raise PermissionError(1, 'Operation not permitted')

    monkeypatch.setattr(os, 'link', no_links)
    key = store_key()
    assert key_home.read_text() == key.hex() and stat.S_IMODE(key_home.stat().st_mode) == 0o600
    assert store_key() == key
    assert sorted(p.name for p in key_home.parent.iterdir()) == ['.secret.lock', 'secret']


RACER = """\
import importlib.util, sys
spec = importlib.util.spec_from_file_location('key', sys.argv[1])
key = importlib.util.module_from_spec(spec)
spec.loader.exec_module(key)
print('ready', flush=True)
sys.stdin.readline()
try:
    print('key', key.store_key().hex(), flush=True)
except key.SealKeyError as exc:
    print('error', exc, flush=True)
"""


def test_processes_racing_at_first_use_all_get_one_key(key_home: Path) -> None:
    """120 real processes, released together once all are ready, make the key file at first use: every one reads
    the same non-empty key."""
    key_home.parent.rmdir()
    env = {**os.environ, 'XDG_CONFIG_HOME': str(key_home.parent.parent)}
    env.pop('HARNESS_SECRET', None)
    racers = [
        subprocess.Popen(
            [sys.executable, '-I', '-S', '-c', RACER, str(KEY_MODULE)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(120)
    ]
    try:
        for racer in racers:
            assert racer.stdout is not None and racer.stdout.readline() == 'ready\n'
        for racer in racers:
            assert racer.stdin is not None
            racer.stdin.write('go\n')
            racer.stdin.flush()
        said = [racer.communicate(timeout=120)[0].strip() for racer in racers]
    finally:
        for racer in racers:
            if racer.poll() is None:
                racer.kill()
                racer.wait()
    assert set(said) == {f'key {key_home.read_text()}'}, sorted(set(said))[:5]
    assert len(key_home.read_text()) == 64
    assert [p.name for p in key_home.parent.iterdir()] == ['secret']


def test_a_process_reading_the_key_while_another_makes_it_gets_that_key(
    key_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The moment the race above rarely hits, held open: one maker stopped just after it began to make the key file
    (a key file made in two steps exists then, empty), while another reads the key. The reader never gets an empty
    key, and both end with the same one."""
    key_home.parent.rmdir()
    made = threading.Event()
    go_on = threading.Event()
    draw = secrets.token_bytes
    first: list[bytes] = []
    thread = threading.Thread(target=lambda: first.append(store_key()))

    def held(n: int) -> bytes:  # the key is drawn once the file was begun; the first maker stops there
        if threading.current_thread() is thread:
            made.set()
            assert go_on.wait(60)
        return draw(n)

    monkeypatch.setattr(secrets, 'token_bytes', held)
    thread.start()
    assert made.wait(60)
    try:
        read = store_key()
    finally:
        go_on.set()
        thread.join()
    assert len(read) == 32 and first == [read] and key_home.read_text() == read.hex()


@pytest.mark.parametrize(
    ('secret', 'words'),
    [('', 'HARNESS_SECRET is set but empty'), ('  \t', 'HARNESS_SECRET is set but empty'),
     ('caf\udcc3', 'HARNESS_SECRET is not UTF-8 text')],
    ids=['empty', 'whitespace', 'not UTF-8'],
)  # fmt: skip
def test_an_empty_or_non_utf8_secret_is_refused_in_one_line(
    secret: str, words: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Any
) -> None:
    with RunStore(tmp_path / 'runs.db') as db:  # the store exists, sealed with the tests' key
        db.create_run(RunRow('r'))
    monkeypatch.setenv('XDG_CONFIG_HOME', str(tmp_path / 'config'))
    monkeypatch.setenv('HARNESS_SECRET', secret)
    with pytest.raises(SealKeyError, match=words):
        store_key()
    with pytest.raises(StoreError, match=words):
        RunStore(tmp_path / 'runs.db')
    assert not (tmp_path / 'config').exists()  # an empty secret does not fall back to making a key file
    done = cli(['runs', '--store', str(tmp_path / 'runs.db')], cwd=tmp_path, env={'HARNESS_SECRET': secret})
    assert done.exit_code == 1 and not done.traceback, done.describe()
    assert words in done.stdout + done.stderr


def test_a_non_utf8_secret_in_a_real_process_is_one_line(tmp_path: Path, offline_env: Callable[..., Any]) -> None:
    """As the shell passes it: bytes that are not UTF-8 (os.environ keeps them as lone surrogates)."""
    with RunStore(tmp_path / 'runs.db') as db:  # the store exists, sealed with the tests' key
        db.create_run(RunRow('r'))
    env: dict[Any, Any] = {**offline_env(), 'HARNESS_SECRET': b'caf\xc3'}
    done = subprocess.run(
        [sys.executable, '-m', 'harness', 'runs', '--store', str(tmp_path / 'runs.db')],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and 'Traceback' not in done.stderr, done.stderr
    assert 'HARNESS_SECRET is not UTF-8 text' in done.stdout + done.stderr
