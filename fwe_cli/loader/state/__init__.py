"""Resume: one state for every reader and adapter (`model`), taken while a loader runs (`taking`), checked against
the loader that resumes it (`check`), and a world of readers continued by another (`elastic`). Built and checked here
only; the pipeline, the loader and the trainers' adapters take it from here."""
