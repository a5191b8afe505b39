"""Shadow mode (``dynamic-scheduler run --shadow``): ours beside the active scheduler, judging
its binds and writing nothing (:mod:`.judge`, :mod:`.events`); ``shadow report`` reads the
verdicts from the running shadow (:mod:`.report`)."""
