"""`make run`: serve the MCP endpoint on http://127.0.0.1:$PORT/mcp in the foreground."""

from __future__ import annotations

from local_stack.stack import main

if __name__ == "__main__":
    main()
