"""Resume: what a loader's state holds, what must match to use it, and how a state of one world continues in
another. Built and checked here only; the pipeline, the loader and the trainers' adapters take it from here."""
