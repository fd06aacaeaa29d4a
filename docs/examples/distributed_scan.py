"""A running sum and a reduction over a tensor sharded across processes, with tritonml.distributed.

Run on one machine with two processes (gloo on CPU, NCCL when every process has a GPU):

    torchrun --nproc-per-node=2 docs/examples/distributed_scan.py

On several machines, start the same command on each with ``--nnodes``, ``--node-rank`` and the
address of node 0 (docs/distributed.md). Each process holds one shard of a (3, 11) tensor along
axis 1 (uneven on purpose: 6 and 5 columns with two processes), scans and reduces it, and checks
its part against the single-process result on the whole tensor, which every process can build
here because the tensor comes from a fixed seed.
"""
import os

import torch
import torch.distributed as dist

import tritonml
import tritonml.distributed as td


def main():
    use_cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if use_cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if use_cuda else "cpu"
    if use_cuda:
        torch.cuda.set_device(device)

    whole = torch.randn(3, 11, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    # shard lengths along axis 1: any split works; here the first ranks take the remainder
    lengths = [11 // world + (r < 11 % world) for r in range(world)]
    start = sum(lengths[:rank])
    shard = whole[:, start:start + lengths[rank]].to(device)

    running = td.cumulative_sum(shard, 1)                        # this rank's part of the scan
    total = td.reduce(shard, "SUM", 1, sharded_axis=1)           # the same on every rank
    top = td.reduce(shard, "ARGMAX", 1, sharded_axis=1, keepdims=False)  # global column indices

    mine = slice(start, start + lengths[rank])
    assert torch.allclose(running.cpu(), tritonml.cumulative_sum(whole, 1)[:, mine])
    assert torch.allclose(total.cpu(), tritonml.reduce(whole, "SUM", 1))
    assert torch.equal(top.cpu(), tritonml.reduce(whole, "ARGMAX", 1, keepdims=False))
    print(f"rank {rank}/{world}: {tuple(shard.shape)} shard; scan, SUM and ARGMAX match the "
          f"single-process result (argmax columns {top.tolist()})")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
