"""Errors a user can cause. The CLI and the app show their message and nothing else."""


class UserError(ValueError):
    """A bad request: unknown preset or drafter, empty prompt, out-of-range setting, bad file."""


class KVCacheFull(RuntimeError):
    """The block pool has no free block left for this request."""
