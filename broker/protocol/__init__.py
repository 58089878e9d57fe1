"""Sans-I/O Kafka wire protocol: framing, headers, and API bodies described as data.

Nothing here touches sockets, files or asyncio; everything turns bytes into values and back.

    framing.py   FrameDecoder: int32 size-prefixed frames out of a byte stream
    types.py     primitive types (ints, varints, strings, bytes, arrays, tagged fields)
    schema.py    the compact declarative form of API schemas (``Api``, ``f``)
    apis/        one module per API family, each a list of ``Api`` values
    codec.py     the one generic codec: compiles (fields, version) into read/write closures
    messages.py  request/response headers, decode_request / encode_response and friends
    errors.py    ErrorCode (Kafka's codes) and the exceptions raised here

Bodies are dicts keyed by the snake_case of Kafka's field names; nested arrays are lists of
dicts. Decoding fills every schema field (defaults where absent), so handlers need no version
checks. ``records`` fields decode to a memoryview slice of the frame (no copy) or None.

How to add an API version: in the API's module under ``apis/``, widen ``versions=`` (and
``flexible=`` if the new version is the first flexible one), then add each new field with the
version it starts in (``f("new_field", "int32", "9+")``), close the range of any removed field
(``"0-8"``), and widen ``nullable=`` / ``tagged=`` ranges as the new version requires. No code
changes: the codec compiles the new version on first use, and the round-trip test in
tests/protocol picks it up. A new API is a new ``Api`` value in a module's ``APIS`` tuple plus
its name in ``ApiKey``.
"""

from .errors import (EncodeError, ErrorCode, FrameTooLargeError, InvalidRequestError,
                     InvalidResponseError, ProtocolError, UnsupportedVersionError, error_name)
from .framing import FrameDecoder
from .messages import (ApiKey, RequestHeader, api_versions_table, decode_request,
                       decode_response, encode_request, encode_response)

__all__ = [
    "ApiKey", "ErrorCode", "RequestHeader", "FrameDecoder", "error_name",
    "decode_request", "encode_response", "encode_request", "decode_response",
    "api_versions_table",
    "ProtocolError", "UnsupportedVersionError", "InvalidRequestError", "InvalidResponseError",
    "FrameTooLargeError", "EncodeError",
]
