"""The scheduling pipeline, without I/O of its own.

Data flows one way: the informers (``scheduler.cluster``) feed the cache and
the queue; the loop pops a pod, runs the profile's filter and score plugins
over a snapshot of the cache, assumes the winner and hands it to the binder.
"""
