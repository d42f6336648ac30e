"""The helpers every script gets (the joins, and `log`/`phase`), written in sandbox Python, and their typed stubs.

Monty's `asyncio.gather` has no `return_exceptions`, so a fan-out that should keep the results
that succeeded needs `settled`; it has no `wait`, `wait_for` or `as_completed` either, so
`first_of`, `quorum` and `within` are written here over host functions (`__race__`,
`__race_won__`, `__deadline__`, answered by `_joins.Joins`), which cancel the calls a join no
longer needs and journal every decision. A member a join can cancel is a call of a catalog
function (the host knows it by its call id, `str(aw)`); any other awaitable runs to its end.
`log` and `phase` report the script's progress through the host function `__progress__`, which the
host answers at once, synchronously (`_sandbox._progress`): they cost nothing and are not calls.

The runtime source is fed to each session before the script (and unchecked); the stub text below
is what the model and the checker see, with `PermissionError`, a builtin the sandbox raises (a
refused call) that its checker does not know.
"""

JOIN_HELPERS = frozenset({'settled', 'settle_all', 'Settled', 'first_of', 'quorum', 'within'})
HELPER_NAMES = JOIN_HELPERS | {'log', 'phase'}
INTERNAL_NAMES = frozenset({'__race__', '__race_won__', '__deadline__', '__member__', '__join__', '__progress__'})
"""The helpers' own internals (the host functions they call, and the functions they are written with): a script
that names one is refused by the checker, and a call of a host function from the script's own code is a NameError."""

HELPERS_SOURCE = """\
import asyncio

async def settled(aw):
    try:
        return {"ok": True, "value": await aw}
    except Exception as e:
        return {"ok": False, "error": str(e)}

async def settle_all(*aws):
    return await asyncio.gather(*[settled(aw) for aw in aws])

async def __member__(race, index, aw):
    try:
        value = await aw
    except Exception as e:
        return {"ok": False, "error": str(e), "rank": -1}
    rank = await __race_won__(race=race, index=index)
    return {"ok": True, "value": value, "rank": rank}

async def __join__(kind, need, aws):
    race = await __race__(kind=kind, need=need, members=[str(aw) for aw in aws])
    outcomes = await asyncio.gather(*[__member__(race, i, aw) for i, aw in enumerate(aws)])
    won = sorted([o for o in outcomes if o["ok"] and o["rank"] < need], key=lambda o: o["rank"])
    if len(won) < need:
        errors = "; ".join([o["error"] for o in outcomes if not o["ok"]])
        raise RuntimeError(f"{kind}: {len(won)} of {len(aws)} calls succeeded, {need} needed ({errors})")
    return [o["value"] for o in won]

async def first_of(*aws):
    return (await __join__("first_of", 1, aws))[0]

async def quorum(k, *aws):
    return await __join__("quorum", k, aws)

async def within(seconds, aw):
    await __deadline__(seconds=seconds, members=[str(aw)])
    return await aw

def log(message):
    __progress__(kind="log", text=message)

def phase(name):
    __progress__(kind="phase", text=name)
"""

HELPER_STUBS = '''\
class PermissionError(OSError):
    """Raised at a call that a rule refused: the call did not run. Catchable."""


T = TypeVar("T")


class Settled(TypedDict, Generic[T]):
    """The outcome of one awaited call: `ok` is True with `value`, or False with `error`."""

    ok: bool
    value: NotRequired[T]
    error: NotRequired[str]


async def settled(aw: Awaitable[T]) -> Settled[T]:
    """Await `aw` and never raise: {"ok": True, "value": ...} or {"ok": False, "error": "..."}."""
    ...


async def settle_all(*aws: Awaitable[T]) -> list[Settled[T]]:
    """Like `asyncio.gather(*aws)`, but a failure does not cancel the rest: one `Settled` per awaitable, in order."""
    ...


async def first_of(*aws: Awaitable[T]) -> T:
    """The value of the first call to succeed; the others are cancelled. Raises if all fail."""
    ...


async def quorum(k: int, *aws: Awaitable[T]) -> list[T]:
    """The values of the first `k` calls to succeed, in the order they finished; the rest are cancelled.
    Raises if fewer than `k` succeed."""
    ...


async def within(seconds: float, aw: Awaitable[T]) -> T:
    """The value of `aw`, or TimeoutError if it has not finished after `seconds` (the call is cancelled)."""
    ...
'''

PROGRESS_MAX_TEXT = 1_000
"""Characters of one `log`/`phase` text a run keeps; the rest is cut."""
PROGRESS_MAX_ENTRIES = 1_000
"""`log`/`phase` entries a run keeps; the ones after are counted, not kept."""

HELPER_STUBS += f'''

def log(message: str) -> None:
    """Report progress while the script runs (not awaited): shown live to the person watching and kept with the
    run. Not a call: costs nothing and counts against no budget. Text past {PROGRESS_MAX_TEXT:,} characters is
    cut; a run keeps its first {PROGRESS_MAX_ENTRIES:,} log/phase entries and only counts the rest."""
    ...


def phase(name: str) -> None:
    """Name the stage the script has reached, e.g. phase("review") (not awaited): shown live as the current
    phase and kept with the run, like `log`."""
    ...
'''
