"""One parser per family of formats: bytes in, `Document`s out, synchronous.

Parsers never touch the file system or the network (the readers do), so the same
code serves a local file and a downloaded URL. Each raises `IngestError` with a
message naming the source; anything else a library raises is wrapped by the
readers.
"""
