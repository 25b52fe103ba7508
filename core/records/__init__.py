"""What the engine reports: StepRecords and the RunResult (``steps``), every number derived from them,
defined once (``metrics``), and the typed, bounded trace-file schema (``trace``). ``recorder`` is the
engine's observer that builds each step's StepRecord; it reads the runtime and the drafter, so it sits
one layer above the rest (docs/architecture.md)."""
