"""A turn with the orchestrator as the store keeps it, for the terminal's chat and the studio's alike."""

from __future__ import annotations

import time

from .._store import Conversation, RunStore, Turn


def record_turn(store: RunStore, conversation: Conversation | None, turn: Turn, *, model_label: str,
                messages_json: str | None) -> Conversation:
    """Store one orchestrator turn and the conversation it belongs to: made on its first turn (titled by the
    prompt's first line), its messages replaced only when the turn produced them (`messages_json`). Returns the
    conversation; raises `StoreError` when the store cannot take it."""
    now = time.time()
    if conversation is None:
        title = turn.prompt.strip().splitlines()[0][:200] if turn.prompt.strip() else ''
        conversation = Conversation(turn.conversation_id, now, now, title, model_label, '[]')
    if messages_json is not None:
        conversation.messages_json = messages_json
    conversation.updated, conversation.model = now, model_label
    store.save_conversation(conversation)
    store.add_turn(turn)
    return conversation
