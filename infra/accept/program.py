"""The program every acceptance TrainJob runs (mounted from a ConfigMap; standard library only, torch when asked).

Each process counts steps in a file of its own on the checkpoint volume and reads it back when it starts, so a
replaced pod carries on from its last saved step: the `resumed_from` it prints proves the restart. With
ACCEPT_ALLREDUCE=1 (torchrun across nodes) rank 0 also measures an NCCL all-reduce and prints the bus bandwidth
(nccl-tests' definition: bytes x 2(n-1)/n per second).

Lines it prints, parsed by infra/accept/jobs.py:
  trainyard-accept start host=H resumed_from=N
  trainyard-accept step=N host=H
  trainyard-accept allreduce ranks=W bytes=B busbw_gbps=X
  trainyard-accept done host=H steps=N
"""

import os
import socket
import time

PREFIX = "trainyard-accept"


def say(text: str) -> None:
    print(f"{PREFIX} {text}", flush=True)


def allreduce() -> None:
    import torch
    import torch.distributed as dist

    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    tensor = torch.ones(64 * 2**20, device="cuda")  # 256 MiB of float32
    for _ in range(3):
        dist.all_reduce(tensor)
    torch.cuda.synchronize()
    rounds, start = 10, time.time()
    for _ in range(rounds):
        dist.all_reduce(tensor)
    torch.cuda.synchronize()
    world, size = dist.get_world_size(), tensor.numel() * 4
    busbw = rounds * size * 2 * (world - 1) / world / (time.time() - start) / 1e9
    if dist.get_rank() == 0:
        say(f"allreduce ranks={world} bytes={size} busbw_gbps={busbw:.2f}")
    dist.destroy_process_group()


def main() -> None:
    directory = os.environ.get("CHECKPOINT_DIR", "/mnt/checkpoints")
    steps = int(os.environ.get("ACCEPT_STEPS", "3"))
    pause = float(os.environ.get("ACCEPT_STEP_SECONDS", "1"))
    host = os.environ.get("HOSTNAME") or socket.gethostname()
    counter = os.path.join(directory, f"{host}.step")
    step = 0
    if os.path.exists(counter):
        with open(counter, encoding="utf-8") as saved:
            step = int(saved.read().strip() or 0)
    say(f"start host={host} resumed_from={step}")
    if os.environ.get("ACCEPT_ALLREDUCE") == "1":
        allreduce()
    while step < steps:
        time.sleep(pause)
        step += 1
        with open(counter + ".tmp", "w", encoding="utf-8") as saving:
            saving.write(str(step))
        os.replace(counter + ".tmp", counter)  # a pod killed mid-write leaves the previous step intact
        say(f"step={step} host={host}")
    say(f"done host={host} steps={step}")


if __name__ == "__main__":
    main()
