"""The join helpers every script gets, written in sandbox Python, and their typed stubs.

Monty's `asyncio.gather` has no `return_exceptions`, so a fan-out that should keep the results
that succeeded needs `settled`. The runtime source is fed to each session before the script (and
unchecked); the stub text below is what the model and the checker see, with `PermissionError`, a
builtin the sandbox raises (a refused call) that its checker does not know.
"""

HELPER_NAMES = frozenset({'settled', 'settle_all', 'Settled'})

HELPERS_SOURCE = """\
import asyncio

async def settled(aw):
    try:
        return {"ok": True, "value": await aw}
    except Exception as e:
        return {"ok": False, "error": str(e)}

async def settle_all(*aws):
    return await asyncio.gather(*[settled(aw) for aw in aws])
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
'''
