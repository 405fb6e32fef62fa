"""An existing training script, as a team has it before pipelines: a linear classifier on a CSV table (columns of
numbers and a `label` column), data-parallel under torchrun, on GPUs when there are any. It knows nothing about
Kubeflow Pipelines; the pipeline's train step runs it unchanged in a TrainJob (see docs/pipelines-guide.md).

Writes to --model-dir: model.pt (the torch state) and model.json (the same weights with the feature scaling, which
the pipeline's evaluate step reads without torch)."""

import argparse
import csv
import json
import os
import pathlib

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--data", required=True)
parser.add_argument("--model-dir", required=True)
parser.add_argument("--epochs", type=int, default=20)
parser.add_argument("--learning-rate", type=float, default=0.05)
parser.add_argument("--batch-size", type=int, default=256)
parser.add_argument("--seed", type=int, default=42)
args = parser.parse_args()

cuda = torch.cuda.is_available()
distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
if distributed:
    dist.init_process_group("nccl" if cuda else "gloo")
rank = dist.get_rank() if distributed else 0
device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}" if cuda else "cpu")
torch.manual_seed(args.seed)

with open(args.data, newline="", encoding="utf-8") as handle:
    rows = list(csv.DictReader(handle))
features = [name for name in rows[0] if name != "label"]
classes = sorted({row["label"] for row in rows})
x = torch.tensor([[float(row[f]) for f in features] for row in rows])
y = torch.tensor([classes.index(row["label"]) for row in rows])
mean, std = x.mean(0), x.std(0).clamp_min(1e-6)
x = ((x - mean) / std).to(device)
y = y.to(device)

model = torch.nn.Linear(len(features), len(classes)).to(device)
trained = torch.nn.parallel.DistributedDataParallel(model) if distributed else model
optimizer = torch.optim.SGD(trained.parameters(), lr=args.learning_rate)
world, shard = (dist.get_world_size(), rank) if distributed else (1, 0)
for epoch in range(args.epochs):
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(args.seed + epoch))[shard::world]
    for start in range(0, len(order), args.batch_size):
        batch = order[start:start + args.batch_size].to(device)
        loss = torch.nn.functional.cross_entropy(trained(x[batch]), y[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    if rank == 0:
        print(f"epoch {epoch}: loss {loss.item():.4f}", flush=True)

if rank == 0:
    out = pathlib.Path(args.model_dir)
    out.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), out / "model.pt")
    (out / "model.json").write_text(json.dumps({
        "features": features, "classes": classes, "mean": mean.tolist(), "std": std.tolist(),
        "weight": model.weight.detach().cpu().tolist(), "bias": model.bias.detach().cpu().tolist()}))
if distributed:
    dist.destroy_process_group()
