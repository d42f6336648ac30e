"""A turn with the orchestrator as the store keeps it, for the terminal's chat and the studio's alike."""

from __future__ import annotations

import time

from .._store import Conversation, RunStore, Turn


def new_conversation(conversation_id: str, prompt: str, model_label: str) -> Conversation:
    """A conversation's record, made at its first turn and titled by that prompt's first line."""
    now = time.time()
    title = prompt.strip().splitlines()[0][:200] if prompt.strip() else ''
    return Conversation(conversation_id, now, now, title, model_label, '[]')


def record_turn(
    store: RunStore, conversation: Conversation, turn: Turn, *, model_label: str, messages_json: str | None
) -> None:
    """Store one orchestrator turn and its conversation, whose messages are replaced only when the turn produced
    them (`messages_json`). Raises `StoreError` when the store cannot take it (the conversation is kept by the
    caller either way, so the next turn continues it)."""
    if messages_json is not None:
        conversation.messages_json = messages_json
    conversation.updated, conversation.model = time.time(), model_label
    store.save_conversation(conversation)
    store.add_turn(turn)
