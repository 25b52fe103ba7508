"""What the engine reports: StepRecords and the RunResult (``steps``), every number derived from them,
defined once (``metrics``), and the typed, bounded trace-file schema (``trace``)."""
