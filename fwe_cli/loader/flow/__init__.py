"""The thread tools under the pipeline: the bounded prefetch queue and the handoff beneath it, work started in the
background and waited for later, a pool whose results come in submission order, and the clock of where the producer's
time goes (`stages`). No thread here dies silently: a producer's error is re-raised in its consumer."""
