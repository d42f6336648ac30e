"""The run store: SQLite, sealed rows and snapshots, the journal a run writes, the plans of resume, replay and fork
read from it, and the facade's parts that stand on it (`DurableRuns`, `Approvals`).

Its surface for the rest of the harness is below: the store, its errors and the consumers' records. The records
the engine passes around (`RunRow`, `Decision`, `Owner`, `Checkpoint`) are in `harness._records`; `_journal`
(what a run writes) and `_durable` (the plans) are imported from their modules, as they stand on the engine's
stages.
"""

from ._connection import StoreError, WouldWait, lookup
from ._sqlite import RunStore
from ._terminal import Conversation, Turn

__all__ = ['Conversation', 'RunStore', 'StoreError', 'Turn', 'WouldWait', 'lookup']
