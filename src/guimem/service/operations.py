"""The operations every front end (CLI, HTTP, MCP) must expose; a parity test checks all three."""

OPERATIONS = ("recall", "learn", "end_round", "stats", "list", "show", "history", "export", "import", "admit",
              "retire")
