"""Running the job on Beam's runners: Prism, Dask, the job service, loopback workers, the
private network and the SDK worker; every use of Beam's private API lives here.

Imports nothing: an SDK worker process imports ``pipeline.runners.sdk_worker`` first.
"""
