"""Imported last by the render children's fork server, after everything it preloads.

Moves every object the server holds into the collector's permanent generation (`gc.freeze`),
so a child's collections never visit them: a visit writes to each object's header, and the
kernel then copies the page it is on into the child. Frozen, those pages stay shared with the
server and every sibling, and each child's PSS is only what it allocates itself
(docs/BENCHMARKS.md §Render pool budget). Never imported by the API or the worker themselves.
"""

import gc

gc.collect()
gc.freeze()
