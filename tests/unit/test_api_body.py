"""Request-body decoding (sift.api.body): encodings, chunking, caps and clear errors."""

from __future__ import annotations

import gzip
import zlib

import pytest

from sift.api.body import _Decoder
from sift.errors import BadRequest, UnsupportedEncoding

BODY = b'{"url": "https://example.org/", "mode": "clean"}' * 20


def _raw_deflate(data: bytes) -> bytes:
    z = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return z.compress(data) + z.flush()


ENCODED = {
    "": BODY,
    "identity": BODY,
    "gzip": gzip.compress(BODY),
    "x-gzip": gzip.compress(BODY),
    "deflate": zlib.compress(BODY),
}


def _decode(header: str, data: bytes, *, step: int, room: int = 1 << 20) -> bytes:
    d = _Decoder(header)
    out = b"".join(d.feed(data[i : i + step], room) for i in range(0, len(data), step))
    return out + d.end()


@pytest.mark.parametrize("header", sorted(ENCODED))
@pytest.mark.parametrize("step", [1, 7, 65536])
def test_every_supported_encoding_decodes_whatever_the_chunking(header, step):
    assert _decode(header, ENCODED[header], step=step) == BODY


@pytest.mark.parametrize("step", [1, 2, 65536])
def test_raw_deflate_is_told_from_zlib_deflate_by_its_first_two_bytes(step):
    assert _decode("deflate", _raw_deflate(BODY), step=step) == BODY


@pytest.mark.parametrize("header", ["br", "zstd", "compress", "gzip, deflate", "GZIP, br"])
def test_other_encodings_are_refused_naming_the_header(header):
    with pytest.raises(UnsupportedEncoding) as e:
        _Decoder(header)
    assert e.value.status == 415 and repr(header) in e.value.msg


def test_decoded_output_never_exceeds_the_room_plus_one_byte():
    bomb = gzip.compress(b"\0" * 10_000_000)
    out = _Decoder("gzip").feed(bomb, 1000)
    assert len(out) == 1001  # the extra byte says "over the cap"


@pytest.mark.parametrize(
    "data, reason",
    [
        (gzip.compress(BODY)[:-5], "truncated"),
        (gzip.compress(BODY) + b"more", "data after"),
        (b"\x1f\x8b garbage", "not valid gzip"),
        (b"x", "truncated"),
    ],
)
def test_a_broken_stream_is_a_400_that_says_why(data, reason):
    header = "deflate" if data == b"x" else "gzip"
    with pytest.raises(BadRequest) as e:
        _decode(header, data, step=3)
    assert e.value.status == 400 and reason in e.value.msg
