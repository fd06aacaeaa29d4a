"""Launch configurations: what a launcher needs to know to launch a kernel, nothing more.

A config comes from the heuristics in ``autotune/`` (importable as ``tritonml_autotune``) or from
the caller (``config=`` on the launchers in ``tritonml.launchers``), so a tuned choice can be passed
in.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

SCAN_REGIMES = ("rows", "columns", "lookback", "chunked")
# The most chunks a "chunked" scan looks back over in one vector load (its window).
MAX_SCAN_WINDOW = 1024
# A reduction's tile slice (SegmentConfig.sub_tiles) holds at least this many positions: the
# smallest tile the segment kernel takes.
MIN_SUB_TILE_AXIS = 16


def _is_pow2(n) -> bool:
    return isinstance(n, int) and n > 0 and n & (n - 1) == 0


@dataclass(frozen=True)
class _TileConfig:
    """The fields every launch config starts with (documented on each config), in this order, so
    ``ScanConfig("rows", 512, 1, 4)`` and ``ReduceConfig("rows", 512, 1, 4)`` read alike."""
    regime: str
    block_axis: int
    block_inner: int
    num_warps: int = 4

    def _check_regime_and_tiles(self, name: str, regimes: tuple, pow2_fields: tuple) -> None:
        """The checks both configs share: a known regime, and the named fields powers of two."""
        if self.regime not in regimes:
            raise ValueError(f"{name}.regime: {self.regime!r} is not one of {regimes}")
        for field in pow2_fields:
            value = getattr(self, field)
            if not _is_pow2(value):
                raise ValueError(f"{name}.{field}: {value!r} must be a power of two")


@dataclass(frozen=True)
class ScanConfig(_TileConfig):
    """How a scan runs.

    regime: "rows" (contiguous axis: tall tiles, programs carry the tally), "columns" (strided
        axis: wide tiles coalesced along the inner dim), "lookback" (the axis split over many
        programs in one pass, one tile each, prefixes handed from tile to tile), "chunked" (the
        axis split into chunks of ``chunk_tiles`` tiles, one program each: fold the chunk, look
        back over ``window`` chunks at once, scan the chunk again). "rows" and "columns" run the
        same kernel with different tiles.
    block_axis, block_inner: tile shape, powers of two.
    num_warps: warps per program on a GPU (ignored by the interpreter).
    chunk_tiles: "chunked" only: tiles per chunk (any int >= 1).
    window: "chunked" only: chunks per look-back group, a power of two from 2 to
        ``MAX_SCAN_WINDOW`` (tritonml/kernels/scan_chunked.py, ``scan_chunked_kernel``).
    """
    chunk_tiles: int = 1
    window: int = 64

    def validate(self, name: str = "config") -> None:
        self._check_regime_and_tiles(name, SCAN_REGIMES, ("block_axis", "block_inner", "num_warps"))
        if self.block_axis * self.block_inner > 1 << 20:
            raise ValueError(f"{name}: a tile of {self.block_axis} x {self.block_inner} elements is "
                             "too large (at most 2**20 elements)")
        if (not isinstance(self.chunk_tiles, int) or isinstance(self.chunk_tiles, bool)
                or self.chunk_tiles < 1):
            raise ValueError(f"{name}.chunk_tiles: {self.chunk_tiles!r} must be an int >= 1")
        if not _is_pow2(self.window) or not 2 <= self.window <= MAX_SCAN_WINDOW:
            raise ValueError(f"{name}.window: {self.window!r} must be a power of two from 2 to "
                             f"{MAX_SCAN_WINDOW}")
        # The window's states are one look-back tile of the chunked kernel; other regimes
        # never read the window (the interpreter's tiles run to 2**16 lanes at the default).
        if self.regime == "chunked" and self.window * self.block_inner > 1 << 16:
            raise ValueError(f"{name}: a look-back window of {self.window} x {self.block_inner} "
                             "lanes is too large (at most 2**16 values)")


REDUCE_REGIMES = ("rows", "columns", "split")
# The most programs a "split" reduction spreads one chain over (the CUDA grid's y limit is 65535;
# stage 2 folds the partials in tiles, so this only bounds the workspace).
MAX_REDUCE_SPLITS = 4096


@dataclass(frozen=True)
class ReduceConfig(_TileConfig):
    """How a reduction runs.

    regime: "rows" (the reduced memory is contiguous: tall tiles), "columns" (a kept dim is
        contiguous: wide tiles coalesced along it), "split" (few outputs from a long reduction: the
        reduced range split over ``splits`` programs per chain, whose partial states then fold in
        a fixed order). All three run the same first kernel; "rows" and "columns" differ only in
        the tile.
    block_axis, block_inner: tile shape (reduced positions x outputs), powers of two.
    num_warps: warps per program on a GPU (ignored by the interpreter).
    splits: programs per chain; 1 for "rows"/"columns", >= 2 for "split".
    block_split: partial states folded per step (a power of two).
    one_launch: "split" only: the chain's last program to finish folds the partial states (one
        launch); False: a second launch folds them. Both give the same bits.
    """
    splits: int = 1
    block_split: int = 64
    one_launch: bool = True

    def validate(self, name: str = "config") -> None:
        self._check_regime_and_tiles(name, REDUCE_REGIMES,
                                     ("block_axis", "block_inner", "num_warps", "block_split"))
        if not isinstance(self.splits, int) or isinstance(self.splits, bool) or self.splits < 1:
            raise ValueError(f"{name}.splits: {self.splits!r} must be an int >= 1")
        if self.regime == "split" and not 2 <= self.splits <= MAX_REDUCE_SPLITS:
            raise ValueError(f"{name}.splits: the split regime needs 2 to {MAX_REDUCE_SPLITS} "
                             f"splits, got {self.splits}")
        if not isinstance(self.one_launch, bool):
            raise TypeError(f"{name}.one_launch: expected a bool, got {self.one_launch!r}")
        if self.regime != "split" and self.splits != 1:
            raise ValueError(f"{name}.splits: regime {self.regime!r} runs one program per chain; "
                             f"splits must be 1, got {self.splits}")
        for tile, shape in ((self.block_axis * self.block_inner, "block_axis x block_inner"),
                            (self.block_split * self.block_inner, "block_split x block_inner")):
            if tile > 1 << 20:
                raise ValueError(f"{name}: a tile of {shape} = {tile} elements is too large "
                                 "(at most 2**20 elements)")


@dataclass(frozen=True)
class SegmentConfig:
    """How a segmented scan or reduction runs (tritonml/kernels/segment.py: one regime).

    block_axis, block_inner: tile shape (axis positions x inner positions), powers of two.
    chunk_tiles: tiles per program (any int >= 1): programs split the axis by elements, whatever
        the segments' lengths.
    window: published chunk tails folded per vector load, a power of two from 2 to
        ``MAX_SCAN_WINDOW``.
    boundary_block: segment boundaries read per vector load while a tile finds its segments, a
        power of two.
    num_warps: warps per program on a GPU (ignored by the interpreter).
    fold_tiles: a chunk that lies inside one segment has no boundary to find; a reduction's
        such chunk, and a sum or product scan's fold of it before its walk, take
        ``fold_tiles`` tiles per step (a power of two).
    sub_tiles: a reduction walks each tile as ``sub_tiles`` slices of block_axis / sub_tiles
        positions (a power of two; slices of at least ``MIN_SUB_TILE_AXIS`` positions): one step
        issues the loads of the whole tile and finds its segments in one read of the
        boundaries, then scans the slices one after another, so a step has the bytes in flight
        of the whole tile and the scan the registers of one slice. Scans take whole tiles (the
        field is not read).
    maxnreg: registers a thread may use on a GPU (Triton's ``maxnreg``, an int from 16 to 255);
        None: ptxas's own choice where it spills nothing, else the lowest cap at which the
        programs an SM holds step down that compiles without spills, found by compiling at the
        specialization's first launch (``tritonml_autotune.registers``).
    """
    block_axis: int
    block_inner: int
    chunk_tiles: int = 1
    window: int = 64
    boundary_block: int = 256
    num_warps: int = 4
    fold_tiles: int = 1
    maxnreg: Optional[int] = None
    sub_tiles: int = 1

    def validate(self, name: str = "config") -> None:
        for field in ("block_axis", "block_inner", "window", "boundary_block", "num_warps",
                      "fold_tiles", "sub_tiles"):
            value = getattr(self, field)
            if not _is_pow2(value):
                raise ValueError(f"{name}.{field}: {value!r} must be a power of two")
        if (not isinstance(self.chunk_tiles, int) or isinstance(self.chunk_tiles, bool)
                or self.chunk_tiles < 1):
            raise ValueError(f"{name}.chunk_tiles: {self.chunk_tiles!r} must be an int >= 1")
        if self.sub_tiles > 1 and self.block_axis // self.sub_tiles < MIN_SUB_TILE_AXIS:
            raise ValueError(f"{name}.sub_tiles: {self.sub_tiles!r} leaves slices of "
                             f"{self.block_axis // self.sub_tiles} positions; they must hold at "
                             f"least {MIN_SUB_TILE_AXIS} (block_axis is {self.block_axis})")
        if not 2 <= self.window <= MAX_SCAN_WINDOW:
            raise ValueError(f"{name}.window: {self.window!r} must be from 2 to {MAX_SCAN_WINDOW}")
        if self.maxnreg is not None and (not isinstance(self.maxnreg, int)
                                         or isinstance(self.maxnreg, bool)
                                         or not 16 <= self.maxnreg <= 255):
            raise ValueError(f"{name}.maxnreg: {self.maxnreg!r} must be None or an int from 16 "
                             "to 255")
        for tile, shape in ((self.block_axis * self.block_inner, "block_axis x block_inner"),
                            (self.block_axis * self.block_inner * self.fold_tiles,
                             "block_axis x block_inner x fold_tiles"),
                            (self.window * self.block_inner, "window x block_inner")):
            if tile > 1 << 16:
                raise ValueError(f"{name}: a tile of {shape} = {tile} lanes is too large (at "
                                 "most 2**16)")
