"""Host side of the training bench: wire protocol, serial link, streaming, session logs.

`bemore` reaches the bench only through this package's documented interfaces, and this package
reads gestures only through the setpoint file format (see docs/formats.md).
"""
