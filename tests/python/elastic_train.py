"""A herd.torch.elastic training script for the restart tests (elastic_restart_test.sh).

A small MLP on a fixed synthetic data set, SGD with momentum through
DistributedOptimizer, an ElasticSampler and a TorchState committed every
--commit-every steps. On launch L of a job (HERD_RESTART_COUNT, 0 when unset),
--kill-rank ends itself with SIGKILL right after the step that entry L of
--kill-at-steps names (a comma-separated list; launches past its end are not
killed). Rank 0 prints
"start: launch L step S epoch E" when training starts and "params: <sha256>" (of every
parameter's bytes, in order) at the end; every rank checks that it ends with rank 0's
parameters.
"""

import argparse
import hashlib
import os
import signal
import sys

import torch

import herd.torch as hvd

SAMPLES, FEATURES, CLASSES, BATCH = 200, 12, 4, 8


def parse():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--commit-every", type=int, default=4)
    parser.add_argument("--kill-rank", type=int, default=-1)
    parser.add_argument("--kill-at-steps", type=lambda text: [int(step) for step in text.split(",")],
                        default=[])
    return parser.parse_args()


def parameter_digest(model):
    digest = hashlib.sha256()
    for tensor in model.state_dict().values():
        digest.update(tensor.detach().contiguous().numpy().tobytes())
    return digest.hexdigest()


def main():
    args = parse()
    hvd.init()
    launch = int(os.environ.get("HERD_RESTART_COUNT") or 0)
    kill_at_step = args.kill_at_steps[launch] if launch < len(args.kill_at_steps) else -1

    data = torch.Generator().manual_seed(3)
    inputs = torch.randn(SAMPLES, FEATURES, generator=data)
    labels = torch.randint(0, CLASSES, (SAMPLES,), generator=data)
    dataset = torch.utils.data.TensorDataset(inputs, labels)

    # The same initial model on every rank; a relaunch's comes from the commit.
    torch.manual_seed(hvd.rank() + 100)
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, 16), torch.nn.Tanh(),
                                torch.nn.Linear(16, CLASSES))
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
        named_parameters=model.named_parameters())
    sampler = hvd.elastic.ElasticSampler(dataset, shuffle=True, seed=11)
    state = hvd.elastic.TorchState(model, optimizer, sampler=sampler, epoch=0, steps=0)

    @hvd.elastic.run
    def train(state):
        if hvd.rank() == 0:
            print(f"start: launch {launch} step {state.steps} epoch {state.epoch}", flush=True)
        loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH, sampler=state.sampler)
        while state.epoch < args.epochs:
            for batch_idx, (x, y) in enumerate(loader):
                state.optimizer.zero_grad()
                loss = torch.nn.functional.cross_entropy(state.model(x), y)
                loss.backward()
                state.optimizer.step()
                state.sampler.record_batch(batch_idx, BATCH)
                state.steps += 1
                if state.steps % args.commit_every == 0:
                    state.commit()
                if hvd.rank() == args.kill_rank and state.steps == kill_at_step:
                    print(f"rank {hvd.rank()}: SIGKILL after step {state.steps}", file=sys.stderr,
                          flush=True)
                    os.kill(os.getpid(), signal.SIGKILL)
            state.epoch += 1
            state.sampler.set_epoch(state.epoch)

    # Rank 0 starts from other parameters than the rest: sync must make them its own.
    train(state)

    digest = parameter_digest(model)
    digests = hvd.allgather_object(digest, name="digests")
    if len(set(digests)) != 1:
        print(f"rank {hvd.rank()}: ranks end with different parameters: {digests}", flush=True)
        sys.exit(1)
    if hvd.rank() == 0:
        print(f"params: {digest}", flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
