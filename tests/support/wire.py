"""What a botocore client reads as an HTTP answer, for tests that answer its requests themselves."""

from __future__ import annotations


class StreamedBody:
    """A raw body botocore can stream, made of ``data``."""

    def __init__(self, data: bytes):
        self.data = data

    def stream(self, **_):
        yield self.data
