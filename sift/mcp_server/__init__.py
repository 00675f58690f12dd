"""`sift mcp`: an MCP server over stdio that gives agents Sift's fetch and batch (docs/MCP.md).

Built on the official `mcp` SDK (installed with the `mcp` extra); it holds no state of its own
beyond a few ended jobs' results, and talks to a running Sift through `sift.client`.
"""
