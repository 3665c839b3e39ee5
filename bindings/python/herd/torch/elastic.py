"""``hvd.elastic``: Horovod's elastic training, which herd does not have yet.

Every name of Horovod's ``horovod.torch.elastic`` (``run``, ``TorchState``,
``ElasticSampler``, ...) raises NotImplementedError when used, so a script
written for elastic Horovod stops at once with the reason instead of running
without the recovery it expects. herd's launcher is where elastic training
(restarting a job that lost a rank) belongs.
"""

_WHY = ("herd.torch.elastic.{name}: herd has no elastic training yet (restarting a job "
        "that lost a rank is the launcher's job, and herd has no launcher yet); run the "
        "script without hvd.elastic")


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    raise NotImplementedError(_WHY.format(name=name))
