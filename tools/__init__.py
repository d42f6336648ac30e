"""Built-in host tools a workflow script may call."""

from .workspace import Match, Workspace, WorkspaceError, register_workspace_tools

__all__ = ['Match', 'Workspace', 'WorkspaceError', 'register_workspace_tools']
