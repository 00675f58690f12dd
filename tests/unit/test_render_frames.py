"""A step's request and its reply each cross the render child's socket in one write, so each
side wakes once per frame (docs/SECURITY.md §Limits and isolation, the frames)."""

from __future__ import annotations

import asyncio
import socket
from multiprocessing.connection import Connection

from sift.fetch import render_child
from sift.fetch.renderpool import SEND_SLICE, _read_frame, _request, _send


def test_a_reply_is_one_packet_whatever_its_size():
    # A packet socket keeps each write apart: the far end sees as many packets as writes.
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with ours, theirs:
        for size in (10, 40_000):  # multiprocessing's own send splits frames over 16 KiB
            data = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
            render_child.send_frame(ours, data)
            packet = theirs.recv(1 << 20)
            assert len(packet) == 4 + size
            assert packet[4:] == data


def test_a_reply_reads_back_as_one_connection_frame():
    ours, theirs = socket.socketpair()
    with ours:
        far = Connection(theirs.detach())
        render_child.send_frame(ours, b"y" * 70_000)
        assert far.recv_bytes() == b"y" * 70_000
        far.close()


async def test_a_request_up_to_a_slice_is_one_write():
    ours, theirs = socket.socketpair()
    reader, writer = await asyncio.open_unix_connection(sock=ours)
    writes: list[int] = []
    transport = writer.transport
    write = transport.write
    transport.write = lambda data: (writes.append(len(data)), write(data))[1]
    body = b"z" * 60_000  # a typical page, carried in the pickle
    try:
        far = Connection(theirs.detach())
        for frame in _request(len, (body,), 5.0):
            await _send(writer, *frame)
        assert writes == [sum(writes)] and writes[0] < SEND_SLICE
        head = far.recv_bytes()  # the count of out-of-band buffers, then the call
        assert head[:4] == b"\0\0\0\0" and len(head) > len(body)
        # and the reply path reads a frame written in one piece
        render_child.send_frame(far, b"ok")
        assert await _read_frame(reader) == b"ok"
        far.close()
    finally:
        writer.close()
