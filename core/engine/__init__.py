"""The speculative step loop (``decoder``: propose -> verify -> accept -> commit) for one request,
and batched decoding (``batch``: several requests, one target forward per step, one KV pool)."""
