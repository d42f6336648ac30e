"""Built-in host tools a workflow script may call."""

from .workspace import Match, ToolRegistry, Workspace, WorkspaceError, register_workspace_tools

__all__ = ['Match', 'ToolRegistry', 'Workspace', 'WorkspaceError', 'register_workspace_tools']
