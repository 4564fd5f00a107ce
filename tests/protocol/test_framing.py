"""FrameBuffer (protocol/framing.py): frames of every size, fed in pieces split anywhere, come
out byte for byte, in order, with nothing left over; a large body is gathered into one buffer of
its size (copied into, or read straight into through ``read_target``) without losing the start
of the next frame that shares its last piece."""
from __future__ import annotations

import os
import random
import struct

import pytest

from pykbroker.protocol.framing import FrameBuffer, FrameTooLarge

SIZES = [0, 1, 3, 100, 5000, 65535, 65536, 70000, 200000, 1 << 20]
PIECES = [1, 2, 5, 100, 4096, 65536, 65537, 300000]


@pytest.mark.parametrize("seed", range(40))
def test_frames_split_anywhere_come_out_whole(seed):
    rnd = random.Random(seed)
    frames = [os.urandom(rnd.choice(SIZES)) for _ in range(rnd.randint(1, 6))]
    stream = b"".join(struct.pack(">i", len(f)) + f for f in frames)
    fb = FrameBuffer(4 << 20)
    out, pos = [], 0
    while pos < len(stream):
        k = rnd.choice(PIECES)
        fb.receive_data(stream[pos:pos + k])
        pos += k
        while (f := fb.next_frame()) is not None:
            out.append(f)
    assert out == frames
    assert fb.pending == 0


def test_large_body_then_next_frame_in_the_same_piece():
    big, small = os.urandom(300000), b"next"
    stream = struct.pack(">i", len(big)) + big + struct.pack(">i", len(small)) + small
    fb = FrameBuffer(1 << 20)
    fb.receive_data(stream[:100000])
    assert fb.next_frame() is None
    fb.receive_data(stream[100000:])   # the rest of the body, the next frame whole
    assert fb.next_frame() == big
    assert fb.next_frame() == small
    assert fb.next_frame() is None and fb.pending == 0


def test_size_prefix_over_the_limit_raises_before_buffering():
    fb = FrameBuffer(1000)
    fb.receive_data(struct.pack(">i", 1001))
    with pytest.raises(FrameTooLarge):
        fb.next_frame()


@pytest.mark.parametrize("seed", range(20))
def test_reads_straight_into_a_large_frame(seed):
    """As the connection reads: into ``read_target()`` while a large body is pending (never past
    its end), else a plain read; frames come out whole, writable (Produce patches in place)."""
    rnd = random.Random(seed)
    frames = [os.urandom(rnd.choice(SIZES)) for _ in range(rnd.randint(1, 6))]
    stream = memoryview(b"".join(struct.pack(">i", len(f)) + f for f in frames))
    fb = FrameBuffer(4 << 20)
    out, pos, direct = [], 0, 0
    while pos < len(stream):
        k = rnd.choice(PIECES)
        target = fb.read_target()
        if target is not None:
            n = min(k, len(target), len(stream) - pos)
            assert n > 0
            target[:n] = stream[pos:pos + n]
            fb.received_into(n)
            direct += n
        else:
            n = min(k, len(stream) - pos)
            fb.receive_data(bytes(stream[pos:pos + n]))
        pos += n
        while (f := fb.next_frame()) is not None:
            assert isinstance(f, bytearray)
            out.append(bytes(f))
    assert out == frames
    assert fb.pending == 0
    if any(len(f) > 65536 + 300000 for f in frames):
        assert direct > 0   # a body that outlasts the first reads was read into directly


def test_an_announced_size_is_not_allocated_before_a_sixteenth_of_it_arrived():
    """A client announcing 4 MB gets no 4 MB buffer for its first 64 KB: the body has its own
    buffer only once it has sent a sixteenth of it (256 KB); the frame still comes out whole."""
    body = os.urandom(4 << 20)
    stream = struct.pack(">i", len(body)) + body
    fb = FrameBuffer(8 << 20)
    fb.receive_data(stream[:4 + 65536])
    assert fb.next_frame() is None and fb.read_target() is None   # nothing allocated for it yet
    fb.receive_data(stream[4 + 65536:4 + (256 << 10)])
    assert fb.next_frame() is None
    target = fb.read_target()
    assert target is not None and len(target) == len(body) - (256 << 10)
    target[:] = stream[4 + (256 << 10):]
    target.release()
    fb.received_into(len(body) - (256 << 10))
    assert fb.next_frame() == body and fb.pending == 0
