"""The look-back protocol the single-pass kernels share: tickets, status words, publish, wait.

Three kernels split one chain of work (a scan, or a segmented scan or reduction, along one axis)
across many programs in a single launch: the look-back scan (tritonml/kernels/scan.py), the
chunked scan (tritonml/kernels/scan_chunked.py) and the segment kernel
(tritonml/kernels/segment.py). Each program owns one piece (a tile or a chunk of tiles), publishes
what later pieces need of it (its aggregate or its inclusive prefix, one vector per state
component) and waits for what earlier pieces published before it writes its own output. They share
one workspace (tritonml/runtime/resident.py) and this protocol on it:

- **Tickets** (``draw_ticket``; ``draw_chunk`` reads one as a chunk of a chain). A program
  takes its piece from a counter, not from its program id: it only ever waits for pieces with
  smaller tickets, which belong to programs that have already started, so no hardware
  scheduling order can deadlock the launch (and the interpreter, which runs programs one after
  another in any order, gives the same result).
- **Status words.** The workspace is int32 words: the int64 ticket word first (its first two
  words), then one status word per piece (``STATUS_BASE + slot``). A status word is
  ``EPOCH_STATES * epoch + state``, the state ``STATE_AGGREGATE`` or ``STATE_PREFIX``; the ticket
  word is ``epoch * TICKET_SPAN + tickets drawn``. The program that draws a launch's last ticket
  moves the word on to the next epoch, so words an earlier launch wrote read as nothing published
  and the workspace never needs clearing (the resident workspace is replaced before the epoch
  could reach 2**28).
- **Publish** (``publish``): a piece's vectors are written first, then its status word with
  release order, so whoever reads the word with acquire order reads the vectors it announces.
- **Wait and look back**: the look-back scan waits on one word at a time (``wait_for_state``)
  and walks back to the nearest published prefix; the chunked scan and the segment kernel poll a
  window of words with one vector load per round trip (``wait_published``, ``wait_counting``),
  then read them once more with acquire order, a barrier after it (the thread that acquired a
  word is not the one that reads its vectors), and read the vectors in one load per component.

Why results are deterministic: a program waits until every value it needs is published, never
folding whatever happens to be ready, so what it folds is fixed by the shape, the offsets and the
config. The look-back scan may find a different published prefix from run to run, but it folds
the aggregates after that prefix forward, in traversal order: the same left fold whichever prefix
it found. Results are bit-identical run to run.
"""
from ..core import backend as _backend, triton_compat as _triton_compat  # noqa: F401

import triton
import triton.language as tl

# Piece states in the status words (EPOCH_STATES * epoch + state).
STATE_AGGREGATE = tl.constexpr(1)  # the piece's own total is readable
STATE_PREFIX = tl.constexpr(2)     # the inclusive prefix (everything up to and including it) is readable
EPOCH_STATES = tl.constexpr(4)
# The ticket word (int64, the workspace's first two int32 words): epoch * TICKET_SPAN + tickets
# drawn in this launch.
TICKET_SPAN = tl.constexpr(1 << 32)
STATUS_BASE = tl.constexpr(2)   # int32 words before the first piece's status word


@triton.jit
def draw_ticket(status_ptr, INDEX_64: tl.constexpr):
    """(ticket, epoch_base): this program's place in the launch's order of work, drawn from the
    ticket word, and the status words' base for this launch (its epoch * EPOCH_STATES). The
    program that draws the last ticket (every other program has drawn, and so read the epoch,
    before it) moves the word on to the next epoch with no tickets drawn: the next launch on the
    stream finds it ready, with no memset."""
    ticket_ptr = status_ptr.to(tl.pointer_type(tl.int64))
    drawn = tl.atomic_add(ticket_ptr, 1)   # epoch * TICKET_SPAN + ticket
    epoch = drawn // TICKET_SPAN
    ticket = drawn % TICKET_SPAN
    if ticket == tl.num_programs(0) - 1:
        tl.atomic_xchg(ticket_ptr, (epoch + 1) * TICKET_SPAN)
    epoch_base = (epoch * EPOCH_STATES).to(tl.int32)
    if not INDEX_64:
        ticket = ticket.to(tl.int32)  # else workspace slots: ticket * BLOCK_INNER may pass int32
    return ticket, epoch_base


@triton.jit
def draw_chunk(status_ptr, n_tiles, chunk_tiles, INDEX_64: tl.constexpr):
    """Draw a ticket (``draw_ticket``) and read it as a chunk of ``chunk_tiles`` tiles: a chain
    of ``n_tiles`` tiles has cdiv(n_tiles, chunk_tiles) chunks, on consecutive tickets in
    traversal order, so a chunk only waits on chunks of its chain with smaller tickets.

    Returns (ticket, epoch_base, chain, chunk, n_chunks, first_step, end_step): the chunk's
    place in its chain and the traversal steps (tiles, in traversal order) it covers,
    ``first_step`` to ``end_step - 1``."""
    ticket, epoch_base = draw_ticket(status_ptr, INDEX_64)
    n_chunks = tl.cdiv(n_tiles, chunk_tiles)
    chunk = ticket % n_chunks
    first_step = chunk * chunk_tiles
    return (ticket, epoch_base, ticket // n_chunks, chunk, n_chunks, first_step,
            tl.minimum(first_step + chunk_tiles, n_tiles))


@triton.jit
def publish(values_ptrs, status_ptr, slot, values, status, BLOCK_INNER: tl.constexpr):
    """Write a piece's [1, BLOCK_INNER] components to their slots (the workspaces: one per data
    component; a FLAGGED scan state's flag is not stored, every piece holds elements), then set
    its status word (epoch and state) with release order."""
    for c in tl.static_range(len(values_ptrs)):
        tl.store(values_ptrs[c] + slot * BLOCK_INNER + tl.arange(0, BLOCK_INNER)[None, :], values[c])
    # Every thread's store must be ordered before the one thread that performs the release.
    tl.debug_barrier()
    tl.atomic_xchg(status_ptr + STATUS_BASE + slot, status, sem="release", scope="gpu")


@triton.jit
def _poll(words, needed):
    """The ``needed`` status ``words`` as they are now (volatile: read again at every poll)."""
    return tl.load(words, mask=needed, other=0, volatile=True)


@triton.jit
def _unpublished(status, needed, epoch_base):
    """How many of the ``needed`` ``status`` words are not yet published in this epoch."""
    return tl.sum((needed & (status <= epoch_base)).to(tl.int32), axis=None)


@triton.jit
def wait_counting(words, needed, epoch_base):
    """Poll until every ``needed`` status word is published in this epoch, the loop carrying
    the count of unpublished words. Triton 3.6's layout pass (``TritonGPURemoveLayoutConversions``)
    compiles this form where it fails on a loop that carries the words; ptxas issues a thread's
    loads of several words one after another in it."""
    waiting = _unpublished(_poll(words, needed), needed, epoch_base)
    while waiting > 0:
        waiting = _unpublished(_poll(words, needed), needed, epoch_base)


# Which form of wait loop compiles (tritonml/core/triton_compat/versions.py LOOP_CARRIES_STATUS).
_CARRY_STATUS = tl.constexpr(_triton_compat.LOOP_CARRIES_STATUS)


@triton.jit
def wait_published(words, needed, epoch_base):
    """Poll the ``needed`` status ``words`` until every one is published in this epoch. From
    Triton 3.8 on the loop carries the words, and a thread's loads of its words are all in flight
    in each poll; before, it carries the count (``wait_counting``)."""
    if _CARRY_STATUS:
        status = _poll(words, needed)
        while _unpublished(status, needed, epoch_base) > 0:
            status = _poll(words, needed)
    else:
        wait_counting(words, needed, epoch_base)


@triton.jit
def read_published(values_ptrs, slot, FLAGGED: tl.constexpr, BLOCK_INNER: tl.constexpr):
    """The [1, BLOCK_INNER] components the piece at ``slot`` published (FLAGGED: with the flag
    set, every piece holding elements)."""
    state = ()
    for c in tl.static_range(len(values_ptrs)):
        # .cg: read from L2, where the publishing program's writes are, not from a stale L1 line.
        state = state + (tl.load(values_ptrs[c] + slot * BLOCK_INNER
                                 + tl.arange(0, BLOCK_INNER)[None, :], cache_modifier=".cg"),)
    if FLAGGED:
        state = state + (tl.full([1, BLOCK_INNER], 1, tl.int1),)
    return state


@triton.jit
def wait_for_state(status_ptr, slot, epoch_base):
    """The state a piece has published in this launch (whose status words are epoch_base +
    state), once it has published one."""
    status = tl.atomic_add(status_ptr + STATUS_BASE + slot, 0, sem="acquire", scope="gpu")
    while status <= epoch_base:
        status = tl.atomic_add(status_ptr + STATUS_BASE + slot, 0, sem="acquire", scope="gpu")
    return status - epoch_base
