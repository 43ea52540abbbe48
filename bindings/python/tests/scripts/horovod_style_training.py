"""A training script written the way Horovod's PyTorch examples are, with
one change: the import. Synthetic 10-class 16x16 "images" stand in for a
dataset (nothing can be downloaded here). It exercises the calls such
scripts make: DistributedSampler over size/rank, lr scaled by size,
DistributedOptimizer with compression, op and gradient_predivide_factor,
broadcast of parameters and optimizer state, metric averaging with named
allreduces, printing on rank 0. Prints "final" lines the test checks."""
import argparse

import torch
import torch.nn.functional as F
import torch.utils.data.distributed

import kolo.torch as hvd  # was: import horovod.torch as hvd


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 8, kernel_size=3)
        self.conv2 = torch.nn.Conv2d(8, 16, kernel_size=3)
        self.dropout = torch.nn.Dropout(0.25)
        self.fc1 = torch.nn.Linear(16 * 6 * 6, 32)
        self.fc2 = torch.nn.Linear(32, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = self.dropout(torch.flatten(x, 1))
        return F.log_softmax(self.fc2(F.relu(self.fc1(x))), dim=1)


def synthetic(n, seed):
    # Each class is a fixed random pattern plus noise: learnable in a few epochs.
    g = torch.Generator().manual_seed(1234)
    patterns = torch.randn(10, 1, 16, 16, generator=g)
    g.manual_seed(seed)
    labels = torch.randint(0, 10, (n,), generator=g)
    images = patterns[labels] + 0.8 * torch.randn(n, 1, 16, 16, generator=g)
    return torch.utils.data.TensorDataset(images, labels)


def metric_average(value, name):
    return hvd.allreduce(torch.tensor(value), name=name).item()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--fp16-allreduce", action="store_true")
    parser.add_argument("--gradient-predivide-factor", type=float, default=1.0)
    args = parser.parse_args()

    hvd.init()
    torch.manual_seed(42)
    torch.set_num_threads(1)

    train_dataset = synthetic(1024, seed=1)
    train_sampler = torch.utils.data.distributed.DistributedSampler(train_dataset, num_replicas=hvd.size(),
                                                                    rank=hvd.rank())
    train_loader = torch.utils.data.DataLoader(train_dataset, batch_size=args.batch_size, sampler=train_sampler)
    test_dataset = synthetic(256, seed=2)
    test_sampler = torch.utils.data.distributed.DistributedSampler(test_dataset, num_replicas=hvd.size(),
                                                                   rank=hvd.rank())
    test_loader = torch.utils.data.DataLoader(test_dataset, batch_size=64, sampler=test_sampler)

    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=0.5)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                         compression=compression, op=hvd.Average,
                                         gradient_predivide_factor=args.gradient_predivide_factor)

    def test():
        model.eval()
        loss, correct = 0.0, 0.0
        with torch.no_grad():
            for data, target in test_loader:
                output = model(data)
                loss += F.nll_loss(output, target, reduction="sum").item()
                correct += output.argmax(dim=1).eq(target).float().sum().item()
        loss = metric_average(loss / len(test_sampler), "avg_loss")
        accuracy = metric_average(correct / len(test_sampler), "avg_accuracy")
        return loss, accuracy

    _, accuracy0 = test()
    for epoch in range(1, args.epochs + 1):
        model.train()
        train_sampler.set_epoch(epoch)
        for batch_idx, (data, target) in enumerate(train_loader):
            optimizer.zero_grad()
            loss = F.nll_loss(model(data), target)
            loss.backward()
            optimizer.step()
        test_loss, accuracy = test()
        if hvd.rank() == 0:
            print("epoch %d: test loss %.4f, accuracy %.1f%%" % (epoch, test_loss, 100 * accuracy))
    checksum = sum(p.double().sum().item() for p in model.parameters())
    print("final rank %d: accuracy %.4f (before training %.4f) checksum %.10e"
          % (hvd.rank(), accuracy, accuracy0, checksum))


if __name__ == "__main__":
    main()
